/**
 * What the OpenAPI document says of search and aggregates (docs/search.md): a searched
 * collection's list parameters, and every collection's aggregate operation and schemas. Which
 * fields may be grouped or aggregated is asked of compileAggregate itself, as a non-superuser,
 * so the document cannot name a field the endpoint refuses, nor leave out one it takes.
 */
import { BadRequestError } from '../errors.js';
import { compileAggregate, MAX_AGGREGATES, MAX_GROUP_FIELDS } from '../query/compile-aggregate.js';
import { MAX_SEARCH_LENGTH } from '../query/search.js';
import type { CollectionSchema } from '../schema/collection-schema.js';
import type { JsonSchema } from './describe-field-schemas.js';
import { responses } from './error-responses.js';
import { listShapeSchema } from './list-shape.js';
import { toBaseTypeName, toTypeName } from './type-names.js';

const query = (name: string, schema: JsonSchema, description: string) => ({ name, in: 'query', required: false, description, schema });

/** Whether compileAggregate takes `input` from a non-superuser: the document describes what they may do. */
function accepts(collection: CollectionSchema, input: { groupBy?: string; fields?: string }): boolean {
  try {
    compileAggregate(collection, input, { superuser: false });
    return true;
  } catch (err) {
    if (err instanceof BadRequestError) return false;
    throw err;
  }
}

/** The searched fields' names, most important first. */
function searchedFields(collection: CollectionSchema): string[] {
  return (collection.search?.columns ?? []).map((column) => collection.fields.find((f) => f.column === column)?.name ?? column);
}

/** The `search` parameter of a collection with a search index. */
function searchParameter(collection: CollectionSchema): Record<string, unknown> {
  const names = searchedFields(collection).map((n) => `\`${n}\``);
  return query(
    'search',
    { type: 'string', maxLength: MAX_SEARCH_LENGTH },
    `Words matched with the collection's search index (${names.join(', ')}; language \`${collection.search!.language}\`): all words must match, "quoted words" as a phrase, \`or\` between words either, \`-word\` excludes (docs/search.md). Only records the list rule lets the caller list are matched.`,
  );
}

/**
 * The list operation's parameters after `page`, `perPage` and `skipTotal`: the shared filter, sort
 * and fields, or, for a collection with a search index, `search` and the sort and fields that
 * go with it (`@rank`, `:highlight`). A collection without one shows no `search`.
 */
export function describeListSearchParameters(collection: CollectionSchema): unknown[] {
  const shared = (name: string) => ({ $ref: `#/components/parameters/${name}` });
  if (collection.search === undefined) return [shared('filter'), shared('sort'), shared('fields')];
  return [
    shared('filter'),
    searchParameter(collection),
    query('sort', { type: 'string' }, 'Comma-separated fields, `-` for descending, `@random`; at most 8. With `search`, `-@rank` orders by relevance (most relevant first) and `@rank` the reverse; without `search` they are a 400. Default: created, then id.'),
    query(
      'fields',
      { type: 'string' },
      `Comma-separated fields to return (\`*\`, \`expand.rel.field\`, \`field:excerpt(n,true)\`, \`field:highlight\`); the others are left out. \`:highlight\` gives a text field's first 2,000 characters HTML-escaped, with each match of \`search\` in a searched field (${searchedFields(collection).join(', ')}) in <mark>…</mark>.`,
    ),
  ];
}

/** What a non-superuser may ask an aggregate of a collection: its groupable fields, its aggregates, and each item property's schema. */
interface AggregateModel {
  readonly groupable: string[];
  readonly aggregates: string[];
  readonly properties: [string, JsonSchema][];
}

/** The aggregate model of a collection whose record schema has `recordProperties` (hidden fields are not among them). */
function describeAggregateModel(collection: CollectionSchema, recordProperties: Record<string, JsonSchema>): AggregateModel {
  const groups: [string, JsonSchema][] = [];
  const aggregates: [string, JsonSchema][] = [['count', { type: 'integer', minimum: 0, description: 'count(): the records of the group.' }]];
  for (const field of collection.fields) {
    const record = recordProperties[field.name];
    if (record === undefined) continue;
    // Grouping by a field named `count` beside the default count() is a clash of names; with another aggregate it is taken.
    if (accepts(collection, { groupBy: field.name, fields: field.name === 'count' ? 'min(id)' : 'count()' })) groups.push([field.name, { ...withoutDescription(record), description: `The group's ${field.name}, as a record writes it.` }]);
    for (const fn of ['sum', 'avg', 'min', 'max'] as const) {
      if (!accepts(collection, { fields: `${fn}(${field.name})` })) continue;
      const value: JsonSchema = fn === 'sum' || fn === 'avg' ? { type: ['number', 'null'] } : { anyOf: [withoutDescription(record), { type: 'null' }] };
      aggregates.push([`${fn}_${field.name}`, { ...value, description: `${fn}(${field.name}); null over no value.` }]);
    }
  }
  const properties = [...groups];
  // A group field may be named like an aggregate (a field `count`): that property is either.
  for (const [name, schema] of aggregates) {
    const at = properties.findIndex(([n]) => n === name);
    if (at === -1) properties.push([name, schema]);
    else properties[at] = [name, { anyOf: [withoutDescription(properties[at]![1]), withoutDescription(schema)], description: `The group's ${name}, or the aggregate of that name.` }];
  }
  return { groupable: groups.map(([n]) => n), aggregates: aggregates.map(([n]) => n), properties };
}

function withoutDescription(schema: JsonSchema): JsonSchema {
  const { description: _description, ...rest } = schema;
  return rest;
}

function propertiesOf(record: JsonSchema): Record<string, JsonSchema> {
  return record.properties as Record<string, JsonSchema>;
}

/**
 * A collection's aggregate schemas, from its record schema: `<Type>AggregateGroup` (one item:
 * each groupable field with its record schema and each aggregate a non-superuser may ask for,
 * all optional since the request's groupBy and fields decide which are present; other keys are
 * single values, for superusers) and `<Type>Aggregate` (the list shape of groups).
 */
export function describeAggregateSchemas(collection: CollectionSchema, record: JsonSchema): [string, JsonSchema][] {
  const model = describeAggregateModel(collection, propertiesOf(record));
  const group = toTypeName(collection.name, 'aggregateGroup');
  return [
    [
      group,
      {
        type: 'object',
        description: `One group of ${collection.name} records: the values of its groupBy fields, then each aggregate asked for in fields (count, sum_<field>, avg_<field>, min_<field>, max_<field>). Only those are present. Other keys only in a superuser's answer: hidden fields and fields with a view rule, grouped or aggregated.`,
        properties: Object.fromEntries(model.properties),
        // A superuser may group and aggregate what the properties leave out (a value, never an array or object).
        additionalProperties: { type: ['string', 'number', 'boolean', 'null'] },
      },
    ],
    [toTypeName(collection.name, 'aggregate'), listShapeSchema(group, { totalItems: 'The number of groups.' })],
  ];
}

/** `GET /api/collections/{c}/aggregate` of one collection, whose record schema is `record` and list rule reads as `rule`. */
export function describeAggregatePath(collection: CollectionSchema, options: { record: JsonSchema; rule: string; maxAggregateGroups: number }): [string, unknown] {
  const name = collection.name;
  const model = describeAggregateModel(collection, propertiesOf(options.record));
  const list = (names: string[]) => (names.length > 0 ? names.map((n) => `\`${n}\``).join(', ') : 'none');
  const parameters: unknown[] = [
    query('groupBy', { type: 'string' }, `Comma-separated fields to group by, at most ${MAX_GROUP_FIELDS}; here: ${list(model.groupable)}. Without it, one group of every record the caller may list.`),
    query(
      'fields',
      { type: 'string', default: 'count()' },
      `Comma-separated aggregates, at most ${MAX_AGGREGATES}: \`count()\`, \`sum(f)\`, \`avg(f)\`, \`min(f)\`, \`max(f)\`, each under its item key; here: ${list(model.aggregates)}.`,
    ),
    { $ref: '#/components/parameters/filter' },
    ...(collection.search === undefined ? [] : [searchParameter(collection)]),
    query('sort', { type: 'string' }, 'Comma-separated group fields and aggregate names (`-count`, `sum_amount`), `-` for descending; the group fields ascending follow as tie-breakers. Default: the group fields ascending.'),
    { $ref: '#/components/parameters/page' },
    { $ref: '#/components/parameters/perPage' },
  ];
  const aggregate = toTypeName(name, 'aggregate');
  return [
    `/api/collections/${name}/aggregate`,
    {
      get: {
        tags: [name],
        operationId: `aggregate${toBaseTypeName(name)}`,
        summary: `Count, sum, average and bound ${name} records in groups`,
        description: `Rule: the list rule, ${options.rule}: only the records it lets the caller list are aggregated, the filter and search fenced behind it as on a list. Fields with a view rule of their own are for superusers only here. At most ${options.maxAggregateGroups} groups (limits.maxAggregateGroups), counted before paging: more is a 400 aggregate_too_many_groups, never a truncated answer.`,
        parameters,
        responses: responses({ 200: { description: 'One page of groups.', content: { 'application/json': { schema: { $ref: `#/components/schemas/${aggregate}` } } } } }, ['AggregateRejected', 'Unauthorized', 'Forbidden']),
      },
    },
  ];
}
