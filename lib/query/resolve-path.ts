import type { CollectionSchema, FieldSchema, SchemaRegistry } from '../schema/collection-schema.js';
import { STORAGE_KINDS, type StorageKind } from '../schema/storage-kinds.js';
import { GEO_POINT_KEYS } from '../schema/fields/geo-point.js';
import { resolveRelation } from './resolve-relation.js';
import { quoteIdent, rawSql, sql, type SqlFragment } from '../sql-fragment.js';

/** Most relation hops in one path (`a.b.c.d.e.f.field` has 6). */
export const MAX_PATH_HOPS = 6;

/**
 * A FROM item that a multi-valued step of a path needs. The comparison that uses the path
 * decides the quantifier (any / all) and wraps these in EXISTS / NOT EXISTS, so rows never multiply.
 * - `collection`: a plain table item (`"posts" "r1"`) for `@collection.posts.*`; `key` lets several
 *   references inside one comparison share it.
 * - `multi` / `elements`: a `LEFT JOIN ...` clause; LEFT so an empty set still yields one row of
 *   empty values, which is how an empty array compares (see docs/query-language.md).
 */
export interface PathSource {
  readonly kind: 'collection' | 'multi' | 'elements';
  readonly alias: string;
  readonly join: SqlFragment;
  readonly key?: string;
}

/** Hands out fresh SQL aliases (`r1`, `r2`, ...) for one compilation, never the main alias. */
export class AliasAllocator {
  private count = 0;

  constructor(private readonly reserved: string) {}

  /** A new alias, unique within this compilation. */
  next(): string {
    let alias: string;
    do alias = `r${++this.count}`;
    while (alias === this.reserved);
    return alias;
  }
}

/** A path resolved to SQL. `value` is correlated with `sources` (empty for a scalar path). */
export interface ResolvedPath {
  readonly value: SqlFragment;
  readonly field: FieldSchema;
  readonly storage: StorageKind;
  readonly sources: readonly PathSource[];
  /** For a path ending on a back-relation: the number of related records (for `:length`). */
  readonly count?: { readonly value: SqlFragment; readonly sources: readonly PathSource[] };
}

/**
 * The extra condition a hop into `target` (rows aliased `alias`) must satisfy, or undefined for
 * none. Used to apply the target collection's view rule for non-superusers: the rows failing it
 * are treated as if they did not exist (a single relation reads empty values, a multi-valued
 * one or a back-relation leaves them out of its set and of its `:length`).
 */
export type TargetCondition = (target: CollectionSchema, alias: string) => SqlFragment | undefined;

/** Options of resolveFieldPath. */
export interface ResolvePathOptions {
  readonly registry: SchemaRegistry;
  readonly collection: CollectionSchema;
  readonly segments: readonly string[];
  /** SQL for a column of the starting row (the main alias, or an @collection alias). */
  readonly ref: (column: string) => SqlFragment;
  readonly aliases: AliasAllocator;
  readonly canSeeHidden: boolean;
  /** False for sort: only single relations may be traversed. */
  readonly allowMulti: boolean;
  /** Builds the error to throw (filter or sort wording, with the position). */
  readonly fail: (what: string) => Error;
  /** Restricts the rows every hop may see (target view rules); absent: every row. */
  readonly targetCondition?: TargetCondition;
  /** Fewer hops than MAX_PATH_HOPS (a realtime subscription's filter). */
  readonly maxHops?: number;
}

/** The SQL of a point's keys (GEO_POINT_KEYS): fixed text, never from the request. */
const GEO_POINT_KEY_SQL: Readonly<Record<(typeof GEO_POINT_KEYS)[number], string>> = { lon: "'lon'", lat: "'lat'" };

/**
 * `loc.lon` / `loc.lat` of a geoPoint field (PocketBase reads the point's keys as a JSON path):
 * a number in degrees, for comparisons, sort and `geoDistance()`. Any other key is an error.
 */
function resolveGeoPointKey(options: { field: FieldSchema; column: SqlFragment; filled: boolean; rest: readonly string[]; sources: readonly PathSource[]; fail: () => Error }): ResolvedPath {
  const key = options.rest.length === 1 ? GEO_POINT_KEYS.find((k) => k === options.rest[0]) : undefined;
  if (key === undefined) throw options.fail();
  // A missing related row reads as the origin, the point's empty value.
  const point = options.filled ? STORAGE_KINDS.geoPoint.fillEmptySql(options.column) : options.column;
  return { value: sql`CAST((${point} ->> ${rawSql(GEO_POINT_KEY_SQL[key])}) AS double precision)`, field: options.field, storage: 'number', sources: options.sources };
}

/**
 * Walks a dotted path from a collection: single relations become correlated scalar subqueries
 * (a missing target reads as empty values), multi-valued relations and back-relations become
 * sources for the caller to quantify over; a geoPoint field's `.lon` and `.lat` are numbers.
 * Unknown, hidden and non-relation steps are errors.
 * `targetCondition` (if any) is ANDed into every hop's subquery or join condition, and into the
 * `:length` count of a back-relation.
 */
export function resolveFieldPath(options: ResolvePathOptions): ResolvedPath {
  const { registry, segments, aliases, canSeeHidden, allowMulti, fail } = options;
  const whole = segments.join('.');
  let collection = options.collection;
  let ref = options.ref;
  const sources: PathSource[] = [];
  let hops = 0;
  /** ` AND (condition)` for rows of `target` aliased `alias`, or nothing. */
  const restrict = (target: CollectionSchema, alias: string): SqlFragment => {
    const condition = options.targetCondition?.(target, alias);
    return condition ? sql` AND (${condition})` : rawSql('');
  };
  for (let i = 0; i < segments.length; i++) {
    const name = segments[i];
    const isLast = i === segments.length - 1;
    const field = collection.field(name);
    if (field && field.hidden && !canSeeHidden) throw fail(`unknown field "${whole}"`);
    if (field && isLast) {
      const column = ref(field.column);
      // A missing related row reads as the field's empty value, as a stored row does.
      const value = hops > 0 ? STORAGE_KINDS[field.storage].fillEmptySql(column) : column;
      return { value, field, storage: field.storage, sources };
    }
    if (field?.type === 'geoPoint') return resolveGeoPointKey({ field, column: ref(field.column), filled: hops > 0, rest: segments.slice(i + 1), sources, fail: () => fail(`"${whole}": a geoPoint field has only "${name}.lon" and "${name}.lat"`) });
    const relation = resolveRelation({ registry, collection, name, canSeeHidden });
    if (!relation) {
      throw fail(field ? `"${name}" in "${whole}" is not a relation field` : `unknown field "${whole}"`);
    }
    const maxHops = options.maxHops ?? MAX_PATH_HOPS;
    if (++hops > maxHops) throw fail(`"${whole}" has more than ${maxHops} relation hop${maxHops === 1 ? '' : 's'}`);
    if (relation.kind === 'field' && !relation.field.multiple) {
      const targetAlias = aliases.next();
      const alias = quoteIdent(targetAlias);
      const parent = ref(relation.field.column);
      const table = quoteIdent(relation.target.table);
      const condition = restrict(relation.target, targetAlias);
      ref = (column) => sql`(SELECT ${alias}.${quoteIdent(column)} FROM ${table} ${alias} WHERE ${alias}."id" = ${parent}${condition})`;
      collection = relation.target;
      continue;
    }
    if (!allowMulti) throw fail(`"${whole}" goes through the multi-valued relation "${name}"`);
    if (relation.kind === 'field') {
      const element = quoteIdent(aliases.next());
      const alias = aliases.next();
      const target = quoteIdent(alias);
      const join = sql`LEFT JOIN LATERAL jsonb_array_elements_text(${ref(relation.field.column)}) AS ${element}("v") ON TRUE `;
      const condition = restrict(relation.target, alias);
      sources.push({
        kind: 'multi',
        alias,
        join: sql`${join}LEFT JOIN ${quoteIdent(relation.target.table)} ${target} ON ${target}."id" = ${element}."v"${condition}`,
      });
      ref = (column) => rawSql(`${target}.${quoteIdent(column)}`);
      collection = relation.target;
      continue;
    }
    const before = [...sources];
    const parentId = ref('id');
    const pointsHere = (alias: string) =>
      relation.field.multiple
        ? sql`${alias}.${quoteIdent(relation.field.column)} @> jsonb_build_array(${parentId})`
        : sql`${alias}.${quoteIdent(relation.field.column)} = ${parentId}`;
    const alias = aliases.next();
    const target = quoteIdent(alias);
    const table = quoteIdent(relation.collection.table);
    const condition = restrict(relation.collection, alias);
    sources.push({ kind: 'multi', alias, join: sql`LEFT JOIN ${table} ${target} ON ${pointsHere(target)}${condition}` });
    ref = (column) => rawSql(`${target}.${quoteIdent(column)}`);
    collection = relation.collection;
    if (isLast) {
      const countedName = aliases.next();
      const counted = quoteIdent(countedName);
      const countCondition = restrict(relation.collection, countedName);
      const count = sql`(SELECT CAST(count(*) AS double precision) FROM ${table} ${counted} WHERE ${pointsHere(counted)}${countCondition})`;
      const idField = collection.field('id') as FieldSchema;
      return {
        value: STORAGE_KINDS.text.fillEmptySql(ref('id')),
        field: idField,
        storage: 'text',
        sources,
        count: { value: count, sources: before },
      };
    }
  }
  throw fail(`unknown field "${whole}"`);
}
