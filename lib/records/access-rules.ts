import { BadRequestError, SchemaError } from '../errors.js';
import { RECORD_ALIAS } from '../db/record-store.js';
import { listOperandNames, type FilterNode, type IdentifierOperand } from '../query/filter-ast.js';
import { compileFilter, type FilterMode } from '../query/compile-filter.js';
import { isBlankFilter, parseFilterCached } from '../query/filter-parser.js';
import { LruCachePerOwner } from '../query/lru-cache.js';
import type { RequestInfo } from '../query/request-info.js';
import { readRequestValue } from '../query/request-values.js';
import { joinSql, sql, type SqlFragment } from '../sql-fragment.js';
import type { CollectionSchema, FieldSchema, ResolvedRules, SchemaRegistry } from '../schema/collection-schema.js';
import { FIELD_RULE_ACTIONS } from '../schema/field-type-spec.js';
import { isSuperuser, type Caller } from './caller.js';

/** The five guarded actions, named as the rules are. */
export type RuleAction = keyof ResolvedRules;

const ACTIONS: readonly RuleAction[] = ['list', 'view', 'create', 'update', 'delete'];

/** What a rule is compiled for: the action, and the normalised body of a write (`@request.body`). */
export interface RuleOptions {
  registry: SchemaRegistry;
  collection: CollectionSchema;
  action: RuleAction;
  caller: Caller;
  /** The write's normalised values (lib/records/normalize-write.ts); `{}` for reads and deletes. */
  body?: Record<string, unknown>;
  /** Macros bound as DeferredValues, for a rule compiled once and checked many times (FilterContext.deferMacros). */
  deferMacros?: boolean;
}

/**
 * What a rule decides for a caller: `'denied'` (a `null` rule refuses everyone but superusers,
 * whatever the record), or the SQL conditions a record must meet (`[]`: every record). A value,
 * not a thrown 403, because each caller answers a refusal its own way: the record service's
 * operations with a 403, a protected file with a 404, an error message by leaving a name out,
 * expand and realtime with nothing.
 */
export type RuleDecision = 'denied' | SqlFragment[];

/**
 * The decision of the rule for `options.action` on this caller: no conditions for superusers and
 * for `""`, `'denied'` for `null`, the compiled expression otherwise.
 */
export function compileRule(options: RuleOptions): RuleDecision {
  const { collection, action, caller } = options;
  if (isSuperuser(caller)) return [];
  const rule = collection.rules[action];
  if (rule === null) return 'denied';
  // Only "" lets anyone: whitespace or a comment alone is refused by checkCollectionRules, and would be a 400 here.
  if (rule === '') return [];
  return [
    compileReusable(collection, 'rule', rule, caller.request, () => {
      const request: RequestInfo = options.body === undefined ? caller.request : { ...caller.request, body: options.body };
      return compileFilter(rule, {
        registry: options.registry,
        collection,
        alias: RECORD_ALIAS,
        request,
        mode: 'rule',
        now: new Date(),
        deferMacros: options.deferMacros,
        creating: action === 'create',
      });
    }),
  ];
}

/**
 * Compiled filters and rules per collection, by mode, text and the request values they read
 * (reuseKey); at most 200 per collection (the cache only saves work; a miss compiles).
 */
const compiledFilters = new LruCachePerOwner<string, SqlFragment>(200);

/**
 * `compile()`, or its earlier result for the same collection, mode, text and request values read
 * (reuseKey). A filter that may not be reused (reuseKey undefined) compiles every time.
 */
function compileReusable(collection: CollectionSchema, mode: FilterMode, text: string, request: RequestInfo, compile: () => SqlFragment): SqlFragment {
  const reads = reuseKey(parseFilterCached(text), collection, mode, request);
  if (reads === undefined) return compile();
  const key = `${mode}\n${text}\n${reads}`;
  const hit = compiledFilters.get(collection, key);
  if (hit) return hit;
  const compiled = compile();
  compiledFilters.set(collection, key, compiled);
  return compiled;
}

/**
 * The key under which a filter or rule on `collection`, compiled in `mode` for `request`, may be
 * reused: the values of the `@request.*` it reads (`""` when it reads none), since the same text
 * and the same values compile to the same SQL. Undefined when it may not be reused at all: it
 * reads `@request.body` (a write's own), a macro such as `@now` (the clock), `@collection.*`, or
 * calls a function (`strftime('%Y')` reads the clock). Besides literals and `@request.*`:
 * - in `rule` and `superuser` mode, which apply no view rules, any field or relation path;
 * - in `user` mode, a field of the collection itself: not a relation hop or back-relation
 *   (`author.name`, or `comments_via_post` even without a dot), which carries its target's view
 *   rule, and a field with a view rule of its own only where that rule may be reused in rule mode
 *   (the filter reads the field through it; the values that rule reads join the key).
 * Decided on the parsed filter and the schema, never on the text.
 */
export function reuseKey(node: FilterNode, collection: CollectionSchema, mode: FilterMode, request: RequestInfo): string | undefined {
  const reads: IdentifierOperand[] = [];
  if (!collectReads(node, collection, mode, reads)) return undefined;
  if (reads.length === 0) return '';
  try {
    return JSON.stringify(
      reads.map((operand) => {
        const read = readRequestValue(request, operand, collection);
        return [read.present, read.guestAuth, read.value instanceof Date ? 'date' : typeof read.value, read.value];
      }),
    );
  } catch {
    return undefined; // an identifier that names nothing: the compile reports it
  }
}

/** Adds the `@request.*` operands a filter reads to `reads`; false when it may not be reused (reuseKey). */
function collectReads(node: FilterNode, collection: CollectionSchema, mode: FilterMode, reads: IdentifierOperand[]): boolean {
  if (node.type !== 'comparison') return node.items.every((item) => collectReads(item, collection, mode, reads));
  return [node.left, node.right].every((operand) => {
    if (operand.type === 'literal') return true;
    if (operand.type !== 'identifier') return false;
    const head = operand.segments[0]!;
    if (head === '@request') {
      if (operand.segments[1] === 'body') return false;
      reads.push(operand);
      return true;
    }
    if (head.startsWith('@')) return false;
    if (mode !== 'user') return true;
    const field = operand.segments.length === 1 ? collection.field(operand.name) : undefined;
    if (field === undefined) return false;
    const rule = field.rules?.view;
    return typeof rule !== 'string' || collectReads(parseFilterCached(rule), collection, 'rule', reads);
  });
}

/** A client's `filter` parameter as SQL conditions (none when absent or blank). */
export function compileUserFilter(options: { registry: SchemaRegistry; collection: CollectionSchema; filter: string | undefined; caller: Caller }): SqlFragment[] {
  const { filter, caller } = options;
  if (filter === undefined || filter === '') return [];
  const mode = isSuperuser(caller) ? 'superuser' : 'user';
  return [
    compileReusable(options.collection, mode, filter, caller.request, () =>
      compileFilter(filter, { registry: options.registry, collection: options.collection, alias: RECORD_ALIAS, request: caller.request, mode, now: new Date() }),
    ),
  ];
}

/**
 * The rule's conditions and the caller's filter, with the filter fenced behind the rule: Postgres
 * orders the conditions of a WHERE by their estimated cost, so a cheap filter would run on rows
 * the rule removes, and an expensive one (a long `~` pattern) would then reveal by its timing
 * what those rows hold. In `CASE WHEN rule THEN filter END` the filter is evaluated only for rows
 * that passed the rule, and the planner cannot reorder it; the rule is also kept as a plain
 * condition of its own, so its indexes still serve the query.
 */
export function fenceFilter(rule: readonly SqlFragment[], filter: readonly SqlFragment[]): SqlFragment[] {
  if (rule.length === 0 || filter.length === 0) return [...rule, ...filter];
  const passes = joinConditions(rule);
  return [passes, sql`CASE WHEN ${passes} THEN ${joinConditions(filter)} ELSE FALSE END`];
}

/** `NOT (conditions)`, where a NULL outcome counts as failing: the records a rule refuses. */
export function negateConditions(conditions: readonly SqlFragment[]): SqlFragment {
  return sql`NOT COALESCE(${joinConditions(conditions)}, false)`;
}

function joinConditions(conditions: readonly SqlFragment[]): SqlFragment {
  return sql`(${joinSql(conditions.map((c) => sql`(${c})`), ' AND ')})`;
}

/** Whether a rule reads `@request.body`, per collection and action; built by checkCollectionRules. */
export interface RuleFacts {
  readsBody(collection: CollectionSchema, action: RuleAction): boolean;
}

/**
 * Compiles every rule of every collection once, when the router is created, so that a typo in a
 * rule (a syntax error, an unknown field, `@request.body.<not a field>`) stops the start with a
 * SchemaError naming the collection, the rule and the position, instead of turning every request
 * into a 400 that blames the client. Returns what the record service needs to know of each rule.
 */
export function checkCollectionRules(registry: SchemaRegistry): RuleFacts {
  const readsBody = new Map<CollectionSchema, Set<RuleAction>>();
  for (const collection of registry.collections) {
    const actions = new Set<RuleAction>();
    for (const action of ACTIONS) {
      const rule = collection.rules[action];
      if (rule === null || rule === '') continue;
      const node = checkRuleCompiles({
        registry,
        collection,
        rule,
        where: `collection "${collection.name}": rule "${action}"`,
        blank: ', which PocketBase refuses as an empty expression: write "" to let anyone, or null to let only superusers',
      });
      if (referencesRequestBody(node)) actions.add(action);
    }
    readsBody.set(collection, actions);
    for (const field of collection.fields) checkFieldRules({ registry, collection, field });
  }
  return { readsBody: (collection, action) => readsBody.get(collection)?.has(action) === true };
}

/** The request rules are compiled against when checked: no identity, no body. */
const CHECK_REQUEST: RequestInfo = { auth: null, query: {}, body: {}, method: 'GET', headers: {}, context: 'default' };

/**
 * Compiles each rule of a field (DESIGN 24) as checkCollectionRules does a collection's, naming
 * the field in its SchemaError. Also how a view's copy of a field is tested (lib/records/compile-collections.ts).
 */
export function checkFieldRules(options: { registry: SchemaRegistry; collection: CollectionSchema; field: FieldSchema }): void {
  const { registry, collection, field } = options;
  for (const action of FIELD_RULE_ACTIONS) {
    const rule = field.rules?.[action];
    if (rule === undefined || rule === null) continue;
    checkRuleCompiles({
      registry,
      collection,
      rule,
      where: `collection "${collection.name}", field "${field.name}": rule "${action}"`,
      blank: ': write "" (or leave it out) to let anyone, or null to let only superusers',
      creating: action === 'create',
    });
  }
}

/**
 * Parses and compiles one rule in rule mode, as the start checks every rule: a SchemaError
 * prefixed by `where` for a rule of whitespace or comments alone (`blank` says what to write
 * instead) and for one that does not compile. Returns the parsed rule.
 */
function checkRuleCompiles(options: { registry: SchemaRegistry; collection: CollectionSchema; rule: string; where: string; blank: string; creating?: boolean }): FilterNode {
  const { registry, collection, rule, where } = options;
  if (isBlankFilter(rule)) throw new SchemaError(`${where} holds only whitespace or comments${options.blank}`);
  try {
    const node = parseFilterCached(rule);
    compileFilter(node, { registry, collection, alias: RECORD_ALIAS, request: CHECK_REQUEST, mode: 'rule', creating: options.creating });
    return node;
  } catch (err) {
    if (!(err instanceof BadRequestError)) throw err;
    throw new SchemaError(`${where} ${err.message.replace(/^Invalid filter: /, 'is invalid: ')}`);
  }
}

function referencesRequestBody(node: FilterNode): boolean {
  if (node.type !== 'comparison') return node.items.some(referencesRequestBody);
  return [node.left, node.right].flatMap(listOperandNames).some((name) => name.segments[0] === '@request' && name.segments[1] === 'body');
}
