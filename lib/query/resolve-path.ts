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
 * What a non-superuser's filter or sort may see of the rows and fields a path reads; absent, every
 * row and every value. Each returns a condition on the row aliased `alias`, or undefined for none.
 * - `rows`: a hop into `target` (its view rule): the rows failing it are treated as if they did
 *   not exist (a single relation reads empty values, a multi-valued one or a back-relation leaves
 *   them out of its set and of its `:length`).
 * - `field`: a field with a view rule of its own (DESIGN 24): where it fails, the field reads as
 *   its empty value, so a filter or sort cannot tell what it holds; a relation field read so leads
 *   nowhere, and a back-relation through it leaves that row out.
 */
export interface PathVisibility {
  rows(target: CollectionSchema, alias: string): SqlFragment | undefined;
  field(collection: CollectionSchema, field: FieldSchema, alias: string): SqlFragment | undefined;
}

/** Options of resolveFieldPath. */
export interface ResolvePathOptions {
  readonly registry: SchemaRegistry;
  readonly collection: CollectionSchema;
  readonly segments: readonly string[];
  /** The SQL alias of the starting row (the main alias, or an @collection alias), unquoted. */
  readonly alias: string;
  readonly aliases: AliasAllocator;
  readonly canSeeHidden: boolean;
  /** False for sort: only single relations may be traversed. */
  readonly allowMulti: boolean;
  /** Builds the error to throw (filter or sort wording, with the position). */
  readonly fail: (what: string) => Error;
  /** Restricts the rows every hop and the values every field may show (view rules); absent: all of them. */
  readonly visibility?: PathVisibility;
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
 * `visibility` (if any) is ANDed into every hop's subquery or join condition and into the
 * `:length` count of a back-relation (`rows`), and guards every field value read (`field`).
 */
export function resolveFieldPath(options: ResolvePathOptions): ResolvedPath {
  const { registry, segments, aliases, canSeeHidden, allowMulti, fail, visibility } = options;
  const whole = segments.join('.');
  let collection = options.collection;
  /** The alias of the row the next step reads, and how an expression over it reaches the outer query. */
  let rowAlias = options.alias;
  let reach = (expression: SqlFragment): SqlFragment => expression;
  const sources: PathSource[] = [];
  let hops = 0;
  /** ` AND (condition)` for rows of `target` aliased `alias`, or nothing. */
  const restrict = (target: CollectionSchema, alias: string): SqlFragment => {
    const condition = visibility?.rows(target, alias);
    return condition ? sql` AND (${condition})` : rawSql('');
  };
  /** A field of the row aliased `alias` as this caller may read it: NULL where its view rule fails. */
  const guarded = (of: CollectionSchema, field: FieldSchema, alias: string): { value: SqlFragment; guarded: boolean } => {
    const column = rawSql(`${quoteIdent(alias)}.${quoteIdent(field.column)}`);
    const condition = visibility?.field(of, field, alias);
    return condition ? { value: sql`CASE WHEN ${condition} THEN ${column} END`, guarded: true } : { value: column, guarded: false };
  };
  for (let i = 0; i < segments.length; i++) {
    const name = segments[i];
    const isLast = i === segments.length - 1;
    const field = collection.field(name);
    if (field && field.hidden && !canSeeHidden) throw fail(`unknown field "${whole}"`);
    if (field && isLast) {
      const read = guarded(collection, field, rowAlias);
      // A missing related row, or a value this caller may not read, reads as the field's empty value, as a stored row does.
      const value = hops > 0 || read.guarded ? STORAGE_KINDS[field.storage].fillEmptySql(reach(read.value)) : reach(read.value);
      return { value, field, storage: field.storage, sources };
    }
    if (field?.type === 'geoPoint') {
      const read = guarded(collection, field, rowAlias);
      return resolveGeoPointKey({ field, column: reach(read.value), filled: hops > 0 || read.guarded, rest: segments.slice(i + 1), sources, fail: () => fail(`"${whole}": a geoPoint field has only "${name}.lon" and "${name}.lat"`) });
    }
    const relation = resolveRelation({ registry, collection, name, canSeeHidden });
    if (!relation) {
      throw fail(field ? `"${name}" in "${whole}" is not a relation field` : `unknown field "${whole}"`);
    }
    const maxHops = options.maxHops ?? MAX_PATH_HOPS;
    if (++hops > maxHops) throw fail(`"${whole}" has more than ${maxHops} relation hop${maxHops === 1 ? '' : 's'}`);
    if (relation.kind === 'field' && !relation.field.multiple) {
      const targetAlias = aliases.next();
      const alias = quoteIdent(targetAlias);
      const parent = reach(guarded(collection, relation.field, rowAlias).value);
      const table = quoteIdent(relation.target.table);
      const condition = restrict(relation.target, targetAlias);
      reach = (expression) => sql`(SELECT ${expression} FROM ${table} ${alias} WHERE ${alias}."id" = ${parent}${condition})`;
      rowAlias = targetAlias;
      collection = relation.target;
      continue;
    }
    if (!allowMulti) throw fail(`"${whole}" goes through the multi-valued relation "${name}"`);
    if (relation.kind === 'field') {
      const element = quoteIdent(aliases.next());
      const alias = aliases.next();
      const target = quoteIdent(alias);
      const join = sql`LEFT JOIN LATERAL jsonb_array_elements_text(${reach(guarded(collection, relation.field, rowAlias).value)}) AS ${element}("v") ON TRUE `;
      const condition = restrict(relation.target, alias);
      sources.push({
        kind: 'multi',
        alias,
        join: sql`${join}LEFT JOIN ${quoteIdent(relation.target.table)} ${target} ON ${target}."id" = ${element}."v"${condition}`,
      });
      rowAlias = alias;
      reach = (expression) => expression;
      collection = relation.target;
      continue;
    }
    const before = [...sources];
    const parentId = reach(rawSql(`${quoteIdent(rowAlias)}."id"`));
    // The back-relation's field as this caller may read it on each pointing row: a row whose field it may not read does not point here.
    const pointsHere = (alias: string) => {
      const pointer = guarded(relation.collection, relation.field, alias).value;
      return relation.field.multiple ? sql`${pointer} @> jsonb_build_array(${parentId})` : sql`${pointer} = ${parentId}`;
    };
    const alias = aliases.next();
    const target = quoteIdent(alias);
    const table = quoteIdent(relation.collection.table);
    const condition = restrict(relation.collection, alias);
    sources.push({ kind: 'multi', alias, join: sql`LEFT JOIN ${table} ${target} ON ${pointsHere(alias)}${condition}` });
    rowAlias = alias;
    reach = (expression) => expression;
    collection = relation.collection;
    if (isLast) {
      const countedName = aliases.next();
      const counted = quoteIdent(countedName);
      const countCondition = restrict(relation.collection, countedName);
      const count = sql`(SELECT CAST(count(*) AS double precision) FROM ${table} ${counted} WHERE ${pointsHere(countedName)}${countCondition})`;
      const idField = collection.field('id') as FieldSchema;
      return {
        value: STORAGE_KINDS.text.fillEmptySql(rawSql(`${target}."id"`)),
        field: idField,
        storage: 'text',
        sources,
        count: { value: count, sources: before },
      };
    }
  }
  throw fail(`unknown field "${whole}"`);
}
