// Over 500 lines: one compiler whose operand and comparison methods share its state (aliases, cost, @collection scopes).
import type { CollectionSchema, FieldSchema, SchemaRegistry } from '../schema/collection-schema.js';
import { STORAGE_KINDS, type StorageKind } from '../schema/storage-kinds.js';
import type { RequestInfo } from './request-info.js';
import type { ComparisonNode, FilterNode, FilterOperand, FunctionOperand, IdentifierOperand } from './filter-ast.js';
import { findCollectionScopes } from './collection-scopes.js';
import { createFilterError, quoteForMessage } from './filter-error.js';
import { DeferredValue, mapValue } from './deferred-value.js';
import { compileFunctionCall, type FunctionArgumentSide } from './filter-functions.js';
import { computeMacro, isMacroName } from './filter-macros.js';
import { MAX_FILTER_COMPARISONS, parseFilterCached } from './filter-parser.js';
import { coerceFilterValue, INVALID, naturalStorageOf } from './filter-values.js';
import { readRequestValue } from './request-values.js';
import { AliasAllocator, resolveFieldPath, type PathSource, type PathVisibility, type ResolvedPath } from './resolve-path.js';
import { isGuestAuth, isNullValue, pickTarget, readsRecord, type ExprSide, type QuantifiedSource, type Quantifier, type Side, type ValueSide } from './filter-sides.js';
import { bindValue, joinSql, quoteIdent, rawSql, sql, type SqlFragment } from '../sql-fragment.js';

/**
 * Who a filter is compiled for, which decides what it may reach:
 * - `rule`: a collection rule (the host's own text): hidden fields and `@collection.*` allowed,
 *   relation hops see every row. A target's view rule is compiled in this mode too, which is what
 *   bounds the recursion of target rules.
 * - `superuser`: a superuser's filter or sort: the same reach as a rule.
 * - `user`: anyone else's filter or sort: no hidden fields, no `@collection.*`, and every relation
 *   hop (`author.email`, `comments_via_post.text`, ...) sees only the target's records that pass
 *   its view rule for this request (a `null` view rule: none), so a filter cannot probe records
 *   the caller may not view.
 */
export type FilterMode = 'rule' | 'superuser' | 'user';

/**
 * Everything a filter may read besides its own text. The compiler stays pure: the HTTP layer
 * builds `request`, the record service picks `alias` and the mode.
 */
export interface FilterContext {
  readonly registry: SchemaRegistry;
  readonly collection: CollectionSchema;
  /** SQL alias of the main table in the surrounding query (e.g. `r`). */
  readonly alias: string;
  readonly request: RequestInfo;
  readonly mode: FilterMode;
  /** The instant macros (`@now`, `@todayStart`, ...) are computed from; default: now. */
  readonly now?: Date;
  /**
   * Bind macros as DeferredValues resolved when the condition runs (lib/query/deferred-value.ts),
   * for a condition compiled once and checked many times (a realtime subscription). `now` then
   * only serves the compile-time checks.
   */
  readonly deferMacros?: boolean;
  /** Bounds stricter than a list's (a realtime subscription's filter); default: MAX_FILTER_COMPARISONS and MAX_PATH_HOPS. */
  readonly limits?: FilterLimits;
  /**
   * The rule guards a create: `@request.body.<field>:changed` then compares the sent value with
   * the field's empty value (a new record has no stored one); otherwise with the row `alias` names.
   */
  readonly creating?: boolean;
}

/** How complex a filter may be: its cost (see FilterCompiler's `cost`) and the hops of one path. */
export interface FilterLimits {
  readonly maxCost: number;
  readonly maxHops: number;
  /** What the filter is, in the error message ("a realtime subscription's filter"). */
  readonly what: string;
}

/** A compiled condition for knex `whereRaw(sql, bindings)`. */
export interface CompiledSql {
  sql: string;
  bindings: unknown[];
}

/** A compiled filter, and its cost (see FilterLimits). */
export interface CompiledFilter extends CompiledSql {
  cost: number;
}

/**
 * Compiles a filter or rule (text, parsed through the cache, or an AST) to a Postgres boolean
 * expression over `context.alias`. Values only ever travel as bindings. Throws BadRequestError
 * (`invalid_filter`) for unknown names, hidden fields, bad literals and syntax errors.
 */
export function compileFilter(filter: string | FilterNode, context: FilterContext): CompiledSql {
  const { sql, bindings } = compileCostedFilter(filter, context);
  return { sql, bindings };
}

/** compileFilter, with the filter's cost too: for a bound a caller keeps over several filters (a realtime client's). */
export function compileCostedFilter(filter: string | FilterNode, context: FilterContext): CompiledFilter {
  const node = typeof filter === 'string' ? parseFilterCached(filter) : filter;
  const compiler = new FilterCompiler(context);
  const compiled = compiler.compileRoot(node);
  return { sql: compiled.sql, bindings: [...compiled.bindings], cost: compiler.totalCost };
}

/** What a hop needs to compile its target collection's view rule. */
export interface TargetRuleOptions {
  readonly registry: SchemaRegistry;
  readonly request: RequestInfo;
  /** The allocator of the surrounding compilation, so the rule's own aliases never clash with it. */
  readonly aliases: AliasAllocator;
  readonly now: Date;
  /** As FilterContext's: the target rules of a condition compiled once read the clock at check time too. */
  readonly deferMacros?: boolean;
}

/**
 * A view rule (a collection's or a field's, DESIGN 24) of `collection` as a condition on its rows
 * aliased `alias`: `FALSE` for `null` (superusers only), undefined for `""` or none (no
 * condition), otherwise the rule compiled in rule mode for the same request. Rule mode applies no
 * view rules itself, so this never recurses.
 */
function compileViewRule(options: TargetRuleOptions & { collection: CollectionSchema; rule: string | null | undefined; alias: string }): SqlFragment | undefined {
  const { rule } = options;
  if (rule === null) return rawSql('FALSE');
  if (rule === undefined || rule === '') return undefined;
  const context: FilterContext = {
    registry: options.registry,
    collection: options.collection,
    alias: options.alias,
    request: options.request,
    mode: 'rule',
    now: options.now,
    deferMacros: options.deferMacros,
  };
  return new FilterCompiler(context, options.aliases).compileRoot(parseFilterCached(rule));
}

/**
 * What a non-superuser's filter or sort may see (PathVisibility): each hop's target records that
 * pass the target's view rule, and each field's value where the field's own view rule passes.
 */
export function callerVisibility(options: TargetRuleOptions): PathVisibility {
  return {
    rows: (target, alias) => compileViewRule({ ...options, collection: target, rule: target.rules.view, alias }),
    field: (collection, field: FieldSchema, alias) => compileViewRule({ ...options, collection, rule: field.rules?.view, alias }),
  };
}

class FilterCompiler {
  private readonly aliases: AliasAllocator;
  /** Rules and superusers: hidden fields and `@collection.*` are within reach (see FilterMode). */
  private readonly trusted: boolean;
  private readonly mainAlias: string;
  /**
   * The filter's cost so far: one per comparison, plus one per argument of a function call and per multi-valued
   * relation hop or back-relation it goes through, against the same limit as comparisons alone
   * (MAX_FILTER_COMPARISONS).
   */
  private cost = 0;
  private readonly now: Date;
  /** What a non-superuser may see of rows and fields (view rules), or undefined when everything is visible. */
  private readonly visibility: PathVisibility | undefined;
  /** `@collection.<name>[:alias]` key -> its FROM item, shared by every reference in the filter. */
  private readonly collectionSources = new Map<string, PathSource>();
  /** For each node, the @collection keys whose EXISTS wraps it (it holds all their references). */
  private scopes = new Map<FilterNode, string[]>();

  /** `aliases`: the allocator of an enclosing compilation (a target view rule inside a filter). */
  constructor(
    private readonly ctx: FilterContext,
    aliases?: AliasAllocator,
  ) {
    this.mainAlias = quoteIdent(ctx.alias);
    this.aliases = aliases ?? new AliasAllocator(ctx.alias);
    this.trusted = ctx.mode !== 'user';
    this.now = ctx.now ?? new Date();
    this.visibility = this.trusted
      ? undefined
      : callerVisibility({ registry: ctx.registry, request: ctx.request, aliases: this.aliases, now: this.now, deferMacros: ctx.deferMacros });
  }

  /** What the filter cost in all (comparisons and multi-valued hops). */
  get totalCost(): number {
    return this.cost;
  }

  compileRoot(node: FilterNode): SqlFragment {
    this.scopes = findCollectionScopes(node);
    return this.compileNode(node);
  }

  private compileNode(node: FilterNode): SqlFragment {
    let compiled: SqlFragment;
    if (node.type === 'comparison') compiled = this.compileComparison(node);
    else if (node.items.length === 0) compiled = rawSql(node.type === 'and' ? 'TRUE' : 'FALSE');
    else {
      const parts = node.items.map((item) => this.compileNode(item));
      compiled = sql`(${joinSql(parts, node.type === 'and' ? ' AND ' : ' OR ')})`;
    }
    const keys = this.scopes.get(node);
    if (!keys) return compiled;
    // One row of each referenced collection, shared by all references below this node.
    const items = keys.map((key, i) => {
      const source = this.collectionSources.get(key) as PathSource;
      return i === 0 ? source.join : sql`CROSS JOIN ${source.join}`;
    });
    return sql`EXISTS (SELECT 1 FROM ${joinSql(items, ' ')} WHERE ${compiled})`;
  }

  // ----- comparisons -------------------------------------------------------------------------

  private compileComparison(node: ComparisonNode): SqlFragment {
    const left = this.resolveOperand(node.left);
    const right = this.resolveOperand(node.right);
    this.charge(node, [left, right]);
    // A guest's identity is empty, and so are many records' owner fields: a guest must never
    // match `owner = @request.auth.id` (or any comparison of their identity with a record value,
    // also inside a function call) through that coincidence. Comparisons of the identity with
    // values stay as they are, so `@request.auth.id = ""` is still true for a guest.
    if ((isGuestAuth(left) || isGuestAuth(right)) && (readsRecord(left) || readsRecord(right))) return rawSql('FALSE');
    const { operator, anyOf } = node;
    const hopQuantifier: Quantifier = anyOf ? 'exists' : 'forall';
    const quantify = (side: Side): QuantifiedSource[] =>
      side.kind === 'value'
        ? []
        : side.sources.map((source) => ({ source, quantifier: side.anyOfSources ? 'exists' : hopQuantifier }));

    // `f = null` / `f != null`: emptiness of the whole value (an array is not iterated).
    if ((operator === '=' || operator === '!=') && (isNullValue(left) || isNullValue(right)) && (left.kind === 'expr' || right.kind === 'expr')) {
      const other = (isNullValue(left) ? right : left) as ExprSide;
      const empty = STORAGE_KINDS[other.storage].isEmptySql(other.sql);
      const cond = operator === '=' ? empty : sql`NOT (${empty})`;
      return this.wrapSources(cond, quantify(other));
    }

    const sources = [...quantify(left), ...quantify(right)];
    const contains = (operator === '~' || operator === '!~') && !anyOf;
    const leftArray = left.kind === 'expr' && left.storage === 'array';
    const rightArray = right.kind === 'expr' && right.storage === 'array';
    // Plain `~` with exactly one array side: "the array contains the value".
    if (contains && leftArray !== rightArray) {
      const array = (leftArray ? left : right) as ExprSide;
      const other = leftArray ? right : left;
      if (!array.each) return this.compileArrayContains({ array, other, negate: operator === '!~', sources });
    }
    const l = this.iterateArray(left, { anyOf, sources });
    const r = this.iterateArray(right, { anyOf, sources });
    const cond = this.compareScalars({ operator, left: l, right: r });
    return this.wrapSources(cond, sources);
  }

  /** Adds a comparison's cost (see `cost`) and refuses a filter that goes over the limit. */
  private charge(node: ComparisonNode, sides: readonly Side[]): void {
    const hops = sides.reduce((n, side) => n + (side.kind === 'expr' ? side.sources.filter((s) => s.kind === 'multi').length + (side.callArguments ?? 0) : 0), 0);
    this.cost += 1 + hops;
    const limits = this.ctx.limits;
    const maxCost = limits?.maxCost ?? MAX_FILTER_COMPARISONS;
    if (this.cost > maxCost) {
      throw createFilterError(
        `too complex${limits ? ` for ${limits.what}` : ''}: each comparison counts 1, and each argument of a function call and each multi-valued relation or back-relation it goes through 1 more, at most ${maxCost} in all`,
        node.pos,
      );
    }
  }

  /** Replaces an array side by its elements (text), adding the element source to `sources`. */
  private iterateArray(side: Side, options: { anyOf: boolean; sources: QuantifiedSource[] }): Side {
    if (side.kind !== 'expr' || side.storage !== 'array') return side;
    const alias = this.aliases.next();
    const join = sql`LEFT JOIN LATERAL jsonb_array_elements_text(${side.sql}) AS ${quoteIdent(alias)}("v") ON TRUE`;
    const quantifier: Quantifier = side.each ? 'forall' : options.anyOf ? 'exists' : 'forall';
    options.sources.push({ source: { kind: 'elements', alias, join }, quantifier });
    return { ...side, sql: STORAGE_KINDS.text.fillEmptySql(rawSql(`${quoteIdent(alias)}."v"`)), storage: 'text', sources: [] };
  }

  private compileArrayContains(options: { array: ExprSide; other: Side; negate: boolean; sources: QuantifiedSource[] }): SqlFragment {
    const { array, other, negate, sources } = options;
    const plainValue = other.kind === 'value' && typeof other.value === 'string' && !other.value.includes('%') && !array.lower;
    if (plainValue && array.sources.length === 0) {
      // Direct membership test: a GIN index on the column can answer it.
      const has = sql`${array.sql} @> jsonb_build_array(${bindValue(other.value, 'text')})`;
      return this.wrapSources(negate ? sql`NOT (${has})` : has, sources);
    }
    const alias = this.aliases.next();
    const join = sql`LEFT JOIN LATERAL jsonb_array_elements_text(${array.sql}) AS ${quoteIdent(alias)}("v") ON TRUE`;
    let element = STORAGE_KINDS.text.fillEmptySql(rawSql(`${quoteIdent(alias)}."v"`)).sql;
    if (array.lower) element = `lower(${element})`;
    let match: SqlFragment;
    if (other.kind === 'value') {
      const text = this.coerceValue(other, { target: 'text', against: array });
      match =
        typeof text === 'string' && text.includes('%')
          ? sql`${element} ILIKE ${bindValue(toLikePattern(text), 'text')}`
          : sql`${element} = ${bindValue(text, 'text')}`;
    } else {
      match = sql`${element} = ${this.exprAs(other, 'text')}`;
    }
    sources.push({ source: { kind: 'elements', alias, join }, quantifier: negate ? 'none' : 'exists' });
    return this.wrapSources(match, sources);
  }

  /** The condition for two scalar sides (elements already unwrapped). */
  private compareScalars(options: { operator: ComparisonNode['operator']; left: Side; right: Side }): SqlFragment {
    const { operator, left, right } = options;
    const target = pickTarget(left, right, operator);
    if (operator === '~' || operator === '!~') {
      const match = this.compileContains(left, right);
      return operator === '~' ? match : sql`NOT (${match})`;
    }
    const l = this.sideAs(left, { target, against: right });
    const r = this.sideAs(right, { target, against: left });
    // Plain `=` keeps indexes usable; it equals IS NOT DISTINCT FROM when a side cannot be NULL.
    const neverNull = (side: Side, frag: SqlFragment) =>
      side.kind === 'value' ? frag.bindings[0] !== null : side.storage === target && STORAGE_KINDS[target].neverNull;
    switch (operator) {
      case '=':
        return neverNull(left, l) || neverNull(right, r) ? sql`${l} = ${r}` : sql`${l} IS NOT DISTINCT FROM ${r}`;
      case '!=':
        return sql`${l} IS DISTINCT FROM ${r}`;
      default:
        return sql`${l} ${operator} ${r}`;
    }
  }

  /** `left ~ right`: case-insensitive "left contains right", everything as text. */
  private compileContains(left: Side, right: Side): SqlFragment {
    const l = this.textOperand(left, right);
    if (right.kind === 'value') {
      const text = this.coerceValue(right, { target: 'text', against: left });
      const pattern = mapValue(text, (value) => (typeof value === 'string' ? toLikePattern(value) : null));
      return sql`${l} ILIKE ${bindValue(pattern, 'text')}`;
    }
    const r = this.textOperand(right, left);
    return sql`strpos(lower(${l}), lower(${r})) > 0`;
  }

  /** A side as non-null text for `~`: NULL numbers/dates read as ''. */
  private textOperand(side: Side, against: Side): SqlFragment {
    if (side.kind === 'value') return bindValue(this.coerceValue(side, { target: 'text', against }), 'text');
    const text = this.exprAs(side, 'text');
    return side.storage === 'text' ? text : STORAGE_KINDS.text.fillEmptySql(text);
  }

  private sideAs(side: Side, options: { target: StorageKind; against: Side }): SqlFragment {
    if (side.kind === 'expr') return this.exprAs(side, options.target);
    return bindValue(this.coerceValue(side, options), STORAGE_KINDS[options.target].bindCast);
  }

  private exprAs(side: ExprSide, target: StorageKind): SqlFragment {
    let value = side.storage === target ? side.sql : STORAGE_KINDS[side.storage].toTextSql(side.sql);
    if (side.lower) value = sql`lower(${value})`;
    return value;
  }

  /**
   * Coerces a compile-time value to the comparison's type. A literal that cannot be coerced is
   * the user's mistake (400); a request value that cannot be is simply NULL (never matches).
   */
  private coerceValue(side: ValueSide, options: { target: StorageKind; against: Side }): unknown {
    const result = coerceFilterValue(side.value, options.target);
    if (result !== INVALID) {
      const { target } = options;
      if (side.macro !== undefined && this.ctx.deferMacros) return DeferredValue.ofMacro(side.macro, (value) => coerceFilterValue(value, target));
      return result;
    }
    if (!side.strict) return null;
    const what = options.target === 'bool' ? 'boolean' : options.target === 'date' ? 'date' : options.target;
    throw createFilterError(`${side.label} is not a valid ${what} to compare with ${quoteForMessage(options.against.label)}`, side.pos);
  }

  /** Wraps a condition in EXISTS / NOT EXISTS for its multi-valued sources, outermost first. */
  private wrapSources(cond: SqlFragment, sources: readonly QuantifiedSource[]): SqlFragment {
    if (sources.length === 0) return cond;
    const ordered = [...sources.filter((s) => s.quantifier !== 'none'), ...sources.filter((s) => s.quantifier === 'none')];
    const groups: QuantifiedSource[][] = [];
    for (const item of ordered) {
      const last = groups[groups.length - 1];
      if (last && last[0].quantifier === item.quantifier && item.quantifier !== 'none') last.push(item);
      else groups.push([item]);
    }
    let inner = cond;
    for (const group of groups.reverse()) {
      const from = this.buildFrom(group);
      if (group[0].quantifier === 'exists') inner = sql`EXISTS (SELECT 1 FROM ${from} WHERE ${inner})`;
      else if (group[0].quantifier === 'forall') inner = sql`NOT EXISTS (SELECT 1 FROM ${from} WHERE (${inner}) IS NOT TRUE)`;
      else inner = sql`NOT EXISTS (SELECT 1 FROM ${from} WHERE ${inner})`;
    }
    return inner;
  }

  private buildFrom(group: readonly QuantifiedSource[]): SqlFragment {
    const parts: SqlFragment[] = [];
    parts.push(rawSql(`(SELECT 1) AS ${quoteIdent(this.aliases.next())}`));
    for (const { source } of group) parts.push(source.join);
    return joinSql(parts, ' ');
  }

  // ----- operands ----------------------------------------------------------------------------

  private resolveOperand(operand: FilterOperand): Side {
    if (operand.type === 'literal') {
      return { kind: 'value', value: operand.value, strict: true, pos: operand.pos, label: literalLabel(operand.value) };
    }
    if (operand.type === 'function') return this.resolveFunction(operand);
    const head = operand.segments[0];
    if (head === '@request') return this.resolveRequest(operand);
    if (head === '@collection') return this.resolveCollection(operand);
    if (head.startsWith('@')) return this.resolveMacro(operand);
    const path = this.resolvePath(operand, { collection: this.ctx.collection, segments: operand.segments, alias: this.ctx.alias });
    return this.applyPathModifier(operand, path);
  }

  private resolvePath(operand: IdentifierOperand, options: { collection: CollectionSchema; segments: readonly string[]; alias: string }): ResolvedPath {
    return resolveFieldPath({
      registry: this.ctx.registry,
      collection: options.collection,
      segments: options.segments,
      alias: options.alias,
      aliases: this.aliases,
      canSeeHidden: this.trusted,
      allowMulti: true,
      fail: (what) => createFilterError(what, operand.pos),
      visibility: this.visibility,
      maxHops: this.ctx.limits?.maxHops,
    });
  }

  private applyPathModifier(operand: IdentifierOperand, path: ResolvedPath): ExprSide {
    const base = { pos: operand.pos, label: operand.name, lower: false, each: false };
    switch (operand.modifier) {
      case undefined:
        return { ...base, kind: 'expr', sql: path.value, storage: path.storage, sources: path.sources };
      case 'lower':
        return { ...base, kind: 'expr', sql: path.value, storage: path.storage, sources: path.sources, lower: true };
      case 'each':
        if (path.storage !== 'array') throw createFilterError(`":each" needs a multi-valued field, not "${operand.name}"`, operand.pos);
        return { ...base, kind: 'expr', sql: path.value, storage: 'array', sources: path.sources, each: true };
      case 'length':
        if (path.count) return { ...base, kind: 'expr', sql: path.count.value, storage: 'number', sources: path.count.sources };
        if (path.storage !== 'array') throw createFilterError(`":length" needs a multi-valued field, not "${operand.name}"`, operand.pos);
        return { ...base, kind: 'expr', sql: sql`jsonb_array_length(${path.value})`, storage: 'number', sources: path.sources };
      case 'isset':
        throw createFilterError(`":isset" is only for @request.* values, not "${operand.name}"`, operand.pos);
      case 'changed':
        throw createFilterError(`":changed" is only for @request.body.* fields, not "${operand.name}"`, operand.pos);
      default:
        throw createFilterError(`unknown modifier ":${operand.modifier}"`, operand.pos);
    }
  }

  /**
   * A function call (lib/query/filter-functions.ts). Its arguments resolve as comparison sides
   * do; it reads its arguments' multi-valued sources, at most one of them (two would pair values
   * of different related records).
   */
  private resolveFunction(call: FunctionOperand): ExprSide {
    const sides = call.args.map((arg) => {
      if (arg.type === 'identifier' && arg.modifier !== undefined) throw createFilterError(`a function's argument takes no modifier ("${arg.name}:${arg.modifier}")`, arg.pos);
      return this.resolveOperand(arg);
    });
    const args = sides.map((side): FunctionArgumentSide => (side.kind === 'value' ? side : { kind: 'expr', sql: side.sql, storage: side.storage, pos: side.pos, label: side.label }));
    const fanning = sides.filter((side) => side.kind === 'expr' && side.sources.length > 0);
    if (fanning.length > 1) throw createFilterError(`${call.name}() may read only one argument through a multi-valued relation or back-relation`, fanning[1]!.pos);
    const compiled = compileFunctionCall(call, args, { nextAlias: () => this.aliases.next(), now: this.now, deferMacros: this.ctx.deferMacros === true });
    return {
      kind: 'expr',
      sql: compiled.sql,
      storage: compiled.storage,
      sources: fanning.flatMap((side) => (side.kind === 'expr' ? side.sources : [])),
      lower: false,
      each: false,
      pos: call.pos,
      label: `${call.name}(...)`,
      callArguments: Math.max(1, call.args.length),
      readsRecord: sides.some(readsRecord),
      guestAuth: sides.some(isGuestAuth),
      anyOfSources: call.name === 'geoDistance',
    };
  }

  private resolveCollection(operand: IdentifierOperand): Side {
    if (!this.trusted) throw createFilterError('@collection is only allowed in rules', operand.pos);
    if (operand.segments.length < 3) throw createFilterError(`"${operand.name}" needs a field ("@collection.<name>.<field>")`, operand.pos);
    const key = operand.segments[1];
    const name = key.split(':')[0];
    const collection = this.ctx.registry.get(name);
    if (!collection || collection.name !== name) throw createFilterError(`unknown collection "${name}"`, operand.pos);
    let source = this.collectionSources.get(key);
    if (!source) {
      const alias = this.aliases.next();
      source = { kind: 'collection', alias, key, join: rawSql(`${quoteIdent(collection.table)} ${quoteIdent(alias)}`) };
      this.collectionSources.set(key, source);
    }
    const path = this.resolvePath(operand, { collection, segments: operand.segments.slice(2), alias: source.alias });
    return this.applyPathModifier(operand, path);
  }

  private resolveMacro(operand: IdentifierOperand): Side {
    if (operand.segments.length !== 1 || !isMacroName(operand.name)) {
      throw createFilterError(`unknown identifier "${operand.name}"`, operand.pos);
    }
    if (operand.modifier !== undefined) throw createFilterError(`macros take no modifier ("${operand.name}:${operand.modifier}")`, operand.pos);
    const value = computeMacro(operand.name, this.now);
    return { kind: 'value', value, strict: true, pos: operand.pos, label: operand.name, hint: value instanceof Date ? 'date' : 'number', macro: operand.name };
  }

  private resolveRequest(operand: IdentifierOperand): Side {
    const read = readRequestValue(this.ctx.request, operand, this.ctx.collection);
    let value = read.value;
    let hint = read.present ? read.storage : undefined;
    if (hint === 'array') value = value === null || value === '' ? [] : Array.isArray(value) ? value : [value];
    else if (hint !== undefined && hint !== 'json' && hint !== 'geoPoint') {
      const coerced = coerceFilterValue(value, hint);
      value = coerced === INVALID ? null : coerced;
    }
    const base = { pos: operand.pos, label: operand.name, guestAuth: read.guestAuth };
    switch (operand.modifier) {
      case undefined:
      case 'each':
      case 'lower':
        break;
      case 'isset':
        return { ...base, kind: 'value', value: read.present, strict: true, hint: 'bool', guestAuth: false };
      case 'changed':
        return this.resolveChanged(operand, { present: read.present, value });
      case 'length':
        return { ...base, kind: 'value', value: Array.isArray(value) ? value.length : null, strict: false, hint: 'number' };
      default:
        throw createFilterError(`unknown modifier ":${operand.modifier}"`, operand.pos);
    }
    if (operand.modifier === 'lower' && value !== null && !Array.isArray(value)) {
      value = (typeof value === 'string' ? value : String(coerceFilterValue(value, 'text'))).toLowerCase();
      hint = 'text';
    }
    // `:each` reads a missing or single request value as a list of zero or one, so that a rule's
    // `:each` never depends on what one caller's identity happens to hold.
    if (operand.modifier === 'each' && !Array.isArray(value)) value = value === null || value === '' ? [] : [value];
    if (Array.isArray(value)) {
      const items = value.map((item) => {
        const text = coerceFilterValue(item, 'text');
        const s = text === INVALID || text === null ? '' : String(text);
        return operand.modifier === 'lower' ? s.toLowerCase() : s;
      });
      const array = bindValue(JSON.stringify(items), 'jsonb');
      return { pos: operand.pos, label: operand.name, kind: 'expr', sql: array, storage: 'array', sources: [], lower: false, each: operand.modifier === 'each' };
    }
    return { ...base, kind: 'value', value, strict: false, hint };
  }

  /**
   * `@request.body.<field>:changed` (PocketBase's): the write sends the field and its normalised
   * value differs from the stored one, compared in SQL with the row the rule is checked on, so
   * every spelling of the write (`role+`, a list, `"TRUE"`, a cleared multipart field) is judged
   * by what it stores. On create there is no stored row: sent and not the field's empty value.
   */
  private resolveChanged(operand: IdentifierOperand, body: { present: boolean; value: unknown }): Side {
    const base = { pos: operand.pos, label: `${operand.name}:changed` };
    if (operand.segments[1] !== 'body') throw createFilterError(`":changed" is only for @request.body.* fields, not "${operand.name}"`, operand.pos);
    const field = this.ctx.collection.field(operand.segments[2]!)!;
    const kind = STORAGE_KINDS[field.storage];
    if (!body.present) return { ...base, kind: 'value', value: false, strict: true, hint: 'bool' };
    if (this.ctx.creating) return { ...base, kind: 'value', value: !kind.isBlank(body.value), strict: true, hint: 'bool' };
    const sent = coerceFilterValue(body.value, field.storage);
    const stored = rawSql(`${this.mainAlias}.${quoteIdent(field.column)}`);
    const changed = sql`(${bindValue(sent === INVALID ? null : sent, kind.bindCast)} IS DISTINCT FROM ${stored})`;
    return { ...base, kind: 'expr', sql: changed, storage: 'bool', sources: [], lower: false, each: false };
  }
}

/**
 * The ILIKE pattern for `~`: `\` and `_` are always literal (escaped with `\`, ILIKE's default
 * escape); without a `%` the value is wrapped as `%value%`, with one the user's `%` are wildcards.
 */
function toLikePattern(value: string): string {
  const escaped = value.replace(/[\\_]/g, (c) => '\\' + c);
  return value.includes('%') ? escaped : `%${escaped}%`;
}

function literalLabel(value: string | number | boolean | null): string {
  return typeof value === 'string' ? quoteForMessage(value) : String(value);
}
