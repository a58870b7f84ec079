import { BadRequestError } from '../errors.js';
import { RECORD_ALIAS, type ExtraColumns, type RecordStore, type RecordValues } from '../db/record-store.js';
import { bindValue, quoteIdent, rawSql, sql, type SqlFragment } from '../sql-fragment.js';
import type { ExpandTree } from '../query/parse-expand.js';
import { resolveRelation, type ResolvedRelation } from '../query/resolve-relation.js';
import { withRequestContext } from '../query/request-info.js';
import type { CollectionSchema, SchemaRegistry } from '../schema/collection-schema.js';
import { compileRule } from './access-rules.js';
import { isSuperuser, type Caller } from './caller.js';
import { fieldViewColumns } from './field-visibility.js';
import { listRelationIds as idsOf } from './relation-ids.js';
import { serializeRecord } from './serialize-record.js';

/** A stored record and the response object being built for it. */
export interface ExpandItem {
  readonly values: RecordValues;
  readonly out: Record<string, unknown>;
}

/**
 * Bounds on what expansion may add to one response (docs/limits.md). A
 * related record counts each time it appears: the same author under 1,000 posts is serialised
 * 1,000 times, and that is what the client receives and what the server must write.
 */
export interface ExpandLimits {
  /** Most related records in the response, repeats included. */
  readonly maxRecords: number;
  /** Most bytes of compact JSON (UTF-8) that expansion adds to the response, repeats included. */
  readonly maxBytes: number;
}

/**
 * One record of the expansion tree. Related records are shared between parents (one object per
 * record and level), so `copies` says how many times `out` will appear in the serialised
 * response: the sum of its parents' copies.
 */
interface ExpandNode extends ExpandItem {
  copies: number;
}

interface ExpandRun {
  readonly registry: SchemaRegistry;
  readonly store: RecordStore;
  readonly caller: Caller;
  readonly budget: ExpandBudget;
}

/** `,"expand":{}`: what a record's first expanded relation adds besides the entry itself. */
const EXPAND_KEY_BYTES = Buffer.byteLength(',"expand":{}');

/** What an ExpandBudget bounds: one response, or every response of a batch together (docs/batch.md). */
export type ExpandScope = 'response' | 'batch';

/** How a refusal names its scope, and what the client can do about it. */
const SCOPE_WORDS: Readonly<Record<ExpandScope, { what: string; advice: string }>> = {
  response: { what: 'the response', advice: 'ask for fewer records per page' },
  batch: { what: "the batch's answer", advice: 'send fewer requests in one batch' },
};

/**
 * Counts the records and bytes expansion adds, level by level, and refuses (400) as soon as a
 * level goes over a limit: before its records are expanded further, so a runaway tree costs one
 * level's query, not six, and that query reads at most one record more than may still be added.
 * One budget may serve several expansions (every response of a batch): they then share its limits.
 */
export class ExpandBudget {
  private records = 0;
  /** Bytes counted exactly. */
  private bytes = 0;
  /** Records counted by an upper bound only (jsonBytesAtMost), not yet serialised, and that bound's sum. */
  private unmeasured: ExpandNode[] = [];
  private bytesAtMost = 0;

  constructor(
    private readonly limits: ExpandLimits,
    private readonly scope: ExpandScope = 'response',
  ) {}

  /** How many more related records the response may take. */
  get recordsLeft(): number {
    return this.limits.maxRecords - this.records;
  }

  addRecords(count: number): void {
    this.records += count;
    if (this.records <= this.limits.maxRecords) return;
    const words = SCOPE_WORDS[this.scope];
    throw new BadRequestError(
      `The expansion would add more than ${this.limits.maxRecords} related records to ${words.what} (limits.maxExpandRecords). ` +
        `Expand fewer or shallower relations, or ${words.advice}.`,
      'expand_too_many_records',
    );
  }

  /**
   * Counts one level: `overhead` exact bytes (keys, brackets, commas) and the records `nodes`
   * (each `copies` times). While the sum stays under the limit by an upper bound, the records are
   * not serialised at all; once the bound says "maybe over", every record counted by its bound so
   * far is serialised (as it was at its own level, without the `expand` a deeper level gave it)
   * and the exact sum decides.
   */
  async addLevel(overhead: number, nodes: readonly ExpandNode[]): Promise<void> {
    this.bytes += overhead;
    let atMost = 0;
    for (const node of nodes) atMost += node.copies * jsonBytesAtMost(node.out);
    if (this.bytes + this.bytesAtMost + atMost <= this.limits.maxBytes) {
      this.bytesAtMost += atMost;
      for (const node of nodes) this.unmeasured.push(node);
      return;
    }
    const toMeasure = [...this.unmeasured, ...nodes];
    this.unmeasured = [];
    this.bytesAtMost = 0;
    for (const [index, node] of toMeasure.entries()) {
      this.bytes += node.copies * jsonBytes(node.out.expand === undefined ? node.out : { ...node.out, expand: undefined });
      // Measuring is serialising: thousands of records take long enough to be felt by others.
      if (index % YIELD_EVERY === YIELD_EVERY - 1) await yieldToEventLoop();
    }
    if (this.bytes <= this.limits.maxBytes) return;
    const words = SCOPE_WORDS[this.scope];
    throw new BadRequestError(
      `The expansion would add more than ${this.limits.maxBytes} bytes to ${words.what} (limits.maxExpandBytes). ` +
        `Expand fewer or shallower relations, or ${words.advice}.`,
      'expand_too_large',
    );
  }
}

/** Sets `out.expand[name]`, and says whether this was the record's first expanded relation. */
function attach(item: ExpandItem, name: string, value: unknown): boolean {
  const first = item.out.expand === undefined;
  const expand = (item.out.expand ??= {}) as Record<string, unknown>;
  // A relation may be named `__proto__`: that one must become an own property, not a prototype.
  if (name === '__proto__') Object.defineProperty(expand, name, { value, enumerable: true, writable: true, configurable: true });
  else expand[name] = value;
  return first;
}

/** Records measured between two turns of the event loop. */
const YIELD_EVERY = 500;

function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

function jsonBytes(value: unknown): number {
  return Buffer.byteLength(JSON.stringify(value), 'utf8');
}

/** Longest JSON of a number: `-0.0000012345678901234567`. */
const NUMBER_BYTES_AT_MOST = 25;
/** Deeper values are serialised instead of bounded. */
const BOUND_DEPTH = 32;

/**
 * An upper bound of `jsonBytes(value)` for plain JSON data (what a response record holds),
 * without serialising: a string counts 6 bytes per UTF-16 unit (`\u001f` is the longest escape;
 * a character is at most 3 UTF-8 bytes per unit), every number 25, and an object or array its
 * brackets, keys and separators. Anything else (a toJSON, a deep value) is measured exactly.
 */
export function jsonBytesAtMost(value: unknown, depth = 0): number {
  switch (typeof value) {
    case 'string':
      return 2 + 6 * value.length;
    case 'number':
      return NUMBER_BYTES_AT_MOST;
    case 'boolean':
      return 5;
    case 'object': {
      if (value === null) return 4;
      if (depth >= BOUND_DEPTH || typeof (value as { toJSON?: unknown }).toJSON === 'function') return jsonBytes(value);
      let bytes = 2;
      if (Array.isArray(value)) {
        for (const item of value) bytes += 1 + (item === undefined ? 4 : jsonBytesAtMost(item, depth + 1));
        return bytes;
      }
      for (const key in value) {
        if (!Object.hasOwn(value, key)) continue;
        const item = (value as Record<string, unknown>)[key];
        if (item !== undefined) bytes += 4 + 6 * key.length + jsonBytesAtMost(item, depth + 1);
      }
      return bytes;
    }
    default: {
      // undefined, a function or a symbol: nothing, or `null` in an array.
      const text = JSON.stringify(value);
      return text === undefined ? 4 : Buffer.byteLength(text, 'utf8');
    }
  }
}

/** Related records by the id of the parent whose back-relation holds them, in query order. */
function indexByParent(related: readonly ExpandNode[], field: string): Map<string, ExpandNode[]> {
  const byParent = new Map<string, ExpandNode[]>();
  for (const node of related) {
    for (const parentId of new Set(idsOf(node.values[field]))) {
      const siblings = byParent.get(parentId);
      if (siblings) siblings.push(node);
      else byParent.set(parentId, [node]);
    }
  }
  return byParent;
}

/** Related records by id (a loop, not a Map built from pairs: no pair array per record). */
function indexById(related: readonly ExpandNode[]): Map<string, ExpandNode> {
  const byId = new Map<string, ExpandNode>();
  for (const node of related) byId.set(String(node.values.id), node);
  return byId;
}

/** The nodes of `ids` that were read, in the ids' order (a loop: `flatMap`'s flattening, which tests every result for an array, buys nothing here). */
function foundNodes(ids: readonly string[], byId: ReadonlyMap<string, ExpandNode>): ExpandNode[] {
  const found: ExpandNode[] = [];
  for (const id of ids) {
    const node = byId.get(id);
    if (node !== undefined) found.push(node);
  }
  return found;
}

/**
 * Rows read per query. A level is read in chunks so that no single step (the driver's rows,
 * turning them into records) holds the event loop for long, and so that reading stops as soon
 * as the level is known to be over the limit.
 */
const READ_CHUNK = 1000;

/**
 * The related rows of one relation for `items`, in the order expansion shows them (stored order
 * for a forward relation, created order for a back-relation). Every row read appears at least
 * once in the response, so reading one row more than the budget has left already means "over":
 * it refuses then (BadRequestError) without reading the rest.
 */
async function readRelated(
  run: ExpandRun,
  options: { relation: ResolvedRelation; target: CollectionSchema; items: readonly ExpandNode[]; where: readonly SqlFragment[]; extra: ExtraColumns | undefined },
): Promise<RecordValues[]> {
  const { relation, target, items, where, extra } = options;
  const cap = run.budget.recordsLeft + 1;
  const rows: RecordValues[] = [];
  if (relation.kind === 'field') {
    const distinct = new Set<string>();
    for (const item of items) for (const id of idsOf(item.values[relation.field.name])) distinct.add(id);
    const ids = [...distinct];
    for (let start = 0; start < ids.length && rows.length < cap; start += READ_CHUNK) {
      const chunk = await run.store.selectByIds({ collection: target, ids: ids.slice(start, start + READ_CHUNK), where, limit: cap - rows.length, extra });
      rows.push(...chunk);
    }
  } else {
    const parentIds = items.map((item) => String(item.values.id));
    for (let last: RecordValues | undefined; rows.length < cap; ) {
      const limit = Math.min(READ_CHUNK, cap - rows.length);
      // Keyset paging in the query's own order (created, id): stable while rows are added.
      const after = last ? [sql`(${rawSql(`${quoteIdent(RECORD_ALIAS)}."created"`)}, ${rawSql(`${quoteIdent(RECORD_ALIAS)}."id"`)}) > (${bindValue(last.created, 'timestamptz')}, ${bindValue(last.id, 'text')})`] : [];
      const chunk = await run.store.selectByRelation({ collection: target, field: relation.field, ids: parentIds, where: [...where, ...after], limit, extra });
      rows.push(...chunk);
      if (chunk.length < limit) break;
      last = chunk[chunk.length - 1];
    }
  }
  if (rows.length >= cap) run.budget.addRecords(cap);
  return rows;
}

async function expandLevel(run: ExpandRun, collection: CollectionSchema, items: readonly ExpandNode[], tree: ExpandTree): Promise<void> {
  const showHidden = isSuperuser(run.caller);
  for (const [name, subtree] of tree) {
    const relation = resolveRelation({ registry: run.registry, collection, name, canSeeHidden: showHidden });
    if (!relation) continue;
    const target = relation.kind === 'field' ? relation.target : relation.collection;
    // A target whose view rule refuses this caller (`null`) is left out of the expansion; the rule
    // reads `@request.context` as "expand", as PocketBase's does.
    const caller = { request: withRequestContext(run.caller.request, 'expand') };
    const where = compileRule({ registry: run.registry, collection: target, action: 'view', caller });
    if (where === 'denied') continue;
    // The target's field view rules, in the same statement: a related record comes without what
    // the caller may not read, and a back-relation through a field it may not read finds nothing.
    const extra = fieldViewColumns({ registry: run.registry, collection: target, caller });
    const rows = await readRelated(run, { relation, target, items, where, extra });
    if (rows.length === 0) continue;
    const related: ExpandNode[] = rows.map((values) => ({ values, out: serializeRecord(target, values, { showHidden }), copies: 0 }));
    const byId = relation.kind === 'field' ? indexById(related) : undefined;
    const byParent = relation.kind === 'back' ? indexByParent(related, relation.field.name) : undefined;
    const asArray = relation.kind === 'back' || relation.field.multiple;
    const entryBytes = jsonBytes(name) + 1; // "name":
    let bytes = 0;
    for (const item of items) {
      const found = byId ? foundNodes(idsOf(item.values[relation.field.name]), byId) : (byParent!.get(String(item.values.id)) ?? []);
      if (found.length === 0) continue;
      const shown = asArray ? found : found.slice(0, 1);
      const first = attach(item, name, asArray ? shown.map((node) => node.out) : shown[0]!.out);
      for (const node of shown) node.copies += item.copies;
      // The entry, the brackets and commas of an array, and the "expand" key or the comma before it.
      const overhead = entryBytes + (asArray ? 1 + shown.length : 0) + (first ? EXPAND_KEY_BYTES : 1);
      bytes += item.copies * overhead;
    }
    const shownNodes = related.filter((node) => node.copies > 0);
    run.budget.addRecords(shownNodes.reduce((sum, node) => sum + node.copies, 0));
    await run.budget.addLevel(bytes, shownNodes);
    if (subtree.size > 0 && shownNodes.length > 0) await expandLevel(run, target, shownNodes, subtree);
  }
}

/**
 * Fills `expand` on each response object (docs/query-language.md): one query per relation per
 * level, whatever the number of records; each related record must pass its own collection's
 * view rule or is left out; unknown names are ignored. A single relation expands to an object,
 * a multiple one and a back-relation to an array; nothing found leaves the key out. A related
 * record is one object shared by all its parents; `budget` (by default one of `limits` for this
 * response alone) bounds what the expansion adds as serialised, repeats included
 * (BadRequestError naming the limit).
 */
export async function expandRecords(options: {
  registry: SchemaRegistry;
  store: RecordStore;
  caller: Caller;
  collection: CollectionSchema;
  items: readonly ExpandItem[];
  tree: ExpandTree;
  /** `limits.maxExpandRecords` and `limits.maxExpandBytes`, for this response alone. */
  limits: ExpandLimits;
  /** What this expansion draws on, shared with others (a batch's responses); `limits` are then unused. */
  budget?: ExpandBudget;
}): Promise<void> {
  if (options.tree.size === 0 || options.items.length === 0) return;
  const run: ExpandRun = { ...options, budget: options.budget ?? new ExpandBudget(options.limits) };
  const roots = options.items.map((item): ExpandNode => ({ values: item.values, out: item.out, copies: 1 }));
  await expandLevel(run, options.collection, roots, options.tree);
}
