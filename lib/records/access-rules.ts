import { BadRequestError, SchemaError } from '../errors.js';
import { RECORD_ALIAS } from '../db/record-store.js';
import { listOperandNames, type FilterNode } from '../query/filter-ast.js';
import { compileFilter, type FilterMode } from '../query/compile-filter.js';
import { isBlankFilter, parseFilterCached } from '../query/filter-parser.js';
import { LruCachePerOwner } from '../query/lru-cache.js';
import type { RequestInfo } from '../query/request-info.js';
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
    compileStaticOnce(collection, 'rule', rule, () => {
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
 * Compiled filters and rules that read nothing of the request or the clock, per collection (the
 * same text compiles to the same SQL); at most 200 per collection (the cache only saves work; a
 * miss compiles).
 */
const staticFilters = new LruCachePerOwner<string, SqlFragment>(200);

/**
 * `compile()`, or its earlier result for the same collection, mode and text when the filter
 * cannot depend on the request (isStaticFilter). Anything else compiles every time.
 */
function compileStaticOnce(collection: CollectionSchema, mode: FilterMode, text: string, compile: () => SqlFragment): SqlFragment {
  const key = `${mode}\n${text}`;
  const hit = staticFilters.get(collection, key);
  if (hit) return hit;
  const compiled = compile();
  if (isStaticFilter(parseFilterCached(text), collection, mode)) staticFilters.set(collection, key, compiled);
  return compiled;
}

/**
 * Whether a filter or rule on `collection`, compiled in `mode`, compiles to the same SQL for every
 * request and at every moment, so that its compiled form may be reused. Never static: `@request.*`
 * (the caller), a macro such as `@now` (the clock), `@collection.*`, and a function call
 * (`strftime('%Y')` reads the clock). Besides literals:
 * - in `rule` and `superuser` mode, which apply no view rules, any field or relation path;
 * - in `user` mode, a field of the collection itself: not a relation hop or back-relation
 *   (`author.name`, or `comments_via_post` even without a dot), which carries its target's view
 *   rule for this request, nor a field with a view rule of its own unless that rule is itself
 *   static in rule mode (the filter reads the field through it: `author.name != ''` reads no
 *   caller, `id = @request.auth.id` does).
 * Decided on the parsed filter and the schema, never on the text.
 */
export function isStaticFilter(node: FilterNode, collection: CollectionSchema, mode: FilterMode): boolean {
  if (node.type !== 'comparison') return node.items.every((item) => isStaticFilter(item, collection, mode));
  return [node.left, node.right].every((operand) => {
    if (operand.type === 'literal') return true;
    if (operand.type !== 'identifier' || operand.segments[0]!.startsWith('@')) return false;
    if (mode !== 'user') return true;
    const field = operand.segments.length === 1 ? collection.field(operand.name) : undefined;
    return field !== undefined && isStaticViewRule(collection, field.rules?.view);
  });
}

/** Whether a field's view rule reads nothing of the request or the clock (no rule: nothing at all). */
export function isStaticViewRule(collection: CollectionSchema, rule: string | null | undefined): boolean {
  return rule === undefined || rule === null || isStaticFilter(parseFilterCached(rule), collection, 'rule');
}

/** A client's `filter` parameter as SQL conditions (none when absent or blank). */
export function compileUserFilter(options: { registry: SchemaRegistry; collection: CollectionSchema; filter: string | undefined; caller: Caller }): SqlFragment[] {
  const { filter, caller } = options;
  if (filter === undefined || filter === '') return [];
  const mode = isSuperuser(caller) ? 'superuser' : 'user';
  return [
    compileStaticOnce(options.collection, mode, filter, () =>
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
      if (isBlankFilter(rule)) {
        throw new SchemaError(
          `collection "${collection.name}": rule "${action}" holds only whitespace or comments, which PocketBase refuses as an empty expression: write "" to let anyone, or null to let only superusers`,
        );
      }
      try {
        const node = parseFilterCached(rule);
        compileFilter(node, { registry, collection, alias: RECORD_ALIAS, request: CHECK_REQUEST, mode: 'rule' });
        if (referencesRequestBody(node)) actions.add(action);
      } catch (err) {
        if (!(err instanceof BadRequestError)) throw err;
        throw new SchemaError(`collection "${collection.name}": rule "${action}" ${err.message.replace(/^Invalid filter: /, 'is invalid: ')}`);
      }
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
    const where = `collection "${collection.name}", field "${field.name}": rule "${action}"`;
    if (isBlankFilter(rule)) throw new SchemaError(`${where} holds only whitespace or comments: write "" (or leave it out) to let anyone, or null to let only superusers`);
    try {
      compileFilter(parseFilterCached(rule), { registry, collection, alias: RECORD_ALIAS, request: CHECK_REQUEST, mode: 'rule', creating: action === 'create' });
    } catch (err) {
      if (!(err instanceof BadRequestError)) throw err;
      throw new SchemaError(`${where} ${err.message.replace(/^Invalid filter: /, 'is invalid: ')}`);
    }
  }
}

function referencesRequestBody(node: FilterNode): boolean {
  if (node.type !== 'comparison') return node.items.some(referencesRequestBody);
  return [node.left, node.right].flatMap(listOperandNames).some((name) => name.segments[0] === '@request' && name.segments[1] === 'body');
}
