/**
 * TypeScript declarations of a router's collections for the pocketbase SDK (docs/openapi.md):
 * one record interface per collection with `expand` typed through relations, create and update
 * input types, and a `TypedPocketBase`. Rendered from the OpenAPI document's schemas, so the
 * types and the document never disagree. Pure and deterministic.
 */
import type { SchemaRegistry } from '../schema/collection-schema.js';
import { buildOpenApiDocument, type OpenApiOptions } from './build-openapi-document.js';
import type { JsonSchema } from './describe-field-schemas.js';
import { toTypeName } from './type-names.js';

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
/** Multipart-only plumbing that the SDK writes for itself. */
const SDK_MANAGED_PROPERTIES = new Set(['@jsonPayload']);

/** A property key as TypeScript needs it: bare when it is an identifier, quoted otherwise (`'views+'`). */
function renderKey(key: string): string {
  return IDENTIFIER.test(key) ? key : JSON.stringify(key);
}

/** A doc comment; `*\/` in the text cannot end it early. */
function renderComment(text: unknown, indent: string): string {
  if (typeof text !== 'string' || text === '') return '';
  return `${indent}/** ${text.replace(/\*\//g, '*\\/').replace(/\s*\n\s*/g, ' ')} */\n`;
}

function unique(types: string[]): string {
  return [...new Set(types)].join(' | ');
}

/**
 * The TypeScript type of a schema, for the subset the document uses: `$ref`, `const`, `enum`,
 * `type` (a list means a union), arrays, and `anyOf` without `type` (a union of its branches).
 * `anyOf` beside a `type` only refines that type (`""` or an email), so the type alone counts.
 * A binary part is a `Blob`, which the SDK turns into a file upload.
 */
function renderType(schema: JsonSchema): string {
  if (typeof schema.$ref === 'string') return schema.$ref.slice(schema.$ref.lastIndexOf('/') + 1);
  if ('const' in schema) return JSON.stringify(schema.const);
  if (Array.isArray(schema.enum)) return unique(schema.enum.map((v) => JSON.stringify(v)));
  if (schema.type !== undefined) {
    const types = Array.isArray(schema.type) ? (schema.type as string[]) : [schema.type as string];
    return unique(types.map((type) => renderTypeName(type, schema)));
  }
  if (Array.isArray(schema.anyOf)) return unique((schema.anyOf as JsonSchema[]).map((s) => renderType(s)));
  return 'unknown';
}

function renderTypeName(type: string, schema: JsonSchema): string {
  switch (type) {
    case 'string':
      return schema.format === 'binary' ? 'Blob' : 'string';
    case 'number':
    case 'integer':
      return 'number';
    case 'boolean':
      return 'boolean';
    case 'null':
      return 'null';
    case 'array':
      return `Array<${renderType((schema.items as JsonSchema | undefined) ?? {})}>`;
    case 'object':
      return schema.properties === undefined ? 'Record<string, unknown>' : renderObjectType(schema);
    default:
      return 'Record<string, unknown>';
  }
}

/** An inline object type from an object schema with properties (a geoPoint's `{ lon: number; lat: number }`). */
function renderObjectType(schema: JsonSchema): string {
  const required = new Set((schema.required as string[] | undefined) ?? []);
  const properties = Object.entries(schema.properties as Record<string, JsonSchema>);
  return `{ ${properties.map(([key, property]) => `${renderKey(key)}${required.has(key) ? '' : '?'}: ${renderType(property)}`).join('; ')} }`;
}

/** An interface from an object schema: each property with its comment, optional unless required. */
function renderInterface(options: { name: string; schema: JsonSchema; comment: string; override?: ReadonlyMap<string, string> }): string {
  const { schema } = options;
  const required = new Set((schema.required as string[] | undefined) ?? []);
  const lines: string[] = [];
  for (const [key, property] of Object.entries((schema.properties as Record<string, JsonSchema> | undefined) ?? {})) {
    if (SDK_MANAGED_PROPERTIES.has(key)) continue;
    // A Map, not an object: a field may be named `__proto__` or `constructor`.
    const type = options.override?.get(key) ?? renderType(property);
    lines.push(`${renderComment(property.description, '  ')}  ${renderKey(key)}${required.has(key) ? '' : '?'}: ${type};`);
  }
  return `${renderComment(options.comment, '')}export interface ${options.name} {\n${lines.join('\n')}\n}\n`;
}

/** Every declaration of one collection: record, expand, create and update. */
function renderCollection(schemas: Record<string, JsonSchema>, name: string): string {
  const record = schemas[toTypeName(name, 'record')];
  const properties = record.properties as Record<string, JsonSchema>;
  const expand = properties.expand;
  const out: string[] = [];
  const expandName = toTypeName(name, 'expand');
  out.push(renderInterface({ name: toTypeName(name, 'record'), schema: record, comment: `A ${name} record as the API returns it.`, override: expand ? new Map([['expand', expandName]]) : undefined }));
  if (expand) out.push(renderInterface({ name: expandName, schema: expand, comment: `What \`expand\` may add to a ${name} record.` }));
  const group = toTypeName(name, 'aggregateGroup');
  out.push(renderInterface({ name: group, schema: schemas[group], comment: `One group of GET /api/collections/${name}/aggregate: the groupBy fields and the aggregates asked for are present.` }));
  out.push(`/** The answer of GET /api/collections/${name}/aggregate: pb.send<${toTypeName(name, 'aggregate')}>(...). */\nexport type ${toTypeName(name, 'aggregate')} = ListResult<${group}>;\n`);
  const create = schemas[toTypeName(name, 'createForm')] ?? schemas[toTypeName(name, 'create')];
  const update = schemas[toTypeName(name, 'updateForm')] ?? schemas[toTypeName(name, 'update')];
  if (create === undefined || update === undefined) {
    // A view collection: read-only, so the SDK's create and update refuse any body at compile time.
    out.push(`/** ${name} is a view collection: read-only, it takes no create body. */\nexport type ${toTypeName(name, 'create')} = never;\n`);
    out.push(`/** ${name} is a view collection: read-only, it takes no update body. */\nexport type ${toTypeName(name, 'update')} = never;\n`);
    return out.join('\n');
  }
  out.push(renderInterface({ name: toTypeName(name, 'create'), schema: create, comment: `The body of pb.collection('${name}').create(...); a Blob makes the SDK send multipart.` }));
  out.push(renderInterface({ name: toTypeName(name, 'update'), schema: update, comment: `The body of pb.collection('${name}').update(id, ...).` }));
  return out.join('\n');
}

/** A map interface from collection name to one of its types. */
function renderMap(name: string, comment: string, entries: [string, string][]): string {
  return `/** ${comment} */\nexport interface ${name} {\n${entries.map(([key, type]) => `  ${renderKey(key)}: ${type};`).join('\n')}\n}\n`;
}

/**
 * Renders the declarations; write them to a `.ts` file and import `TypedPocketBase` from it.
 * `options` are the router's, as for its document: the header then names the schema version
 * that the router's `/api/openapi.json` states.
 */
export function renderTypeScriptTypes(registry: SchemaRegistry, options: OpenApiOptions): string {
  const document = buildOpenApiDocument(registry, options);
  const schemas = (document.components as { schemas: Record<string, JsonSchema> }).schemas;
  const names = registry.collections.map((c) => c.name);
  const parts: string[] = [
    [
      '/**',
      ' * TypeScript declarations of the recordbase collections, for the pocketbase SDK.',
      ` * Generated by \`recordbase types\` (schema version ${String((document.info as { version: string }).version)}).`,
      ' * Do not edit: run the command again after changing the collections.',
      ' */',
      "import type PocketBase from 'pocketbase';",
      "import type { ListResult, RecordFullListOptions, RecordListOptions, RecordOptions, RecordService } from 'pocketbase';",
      '',
      '/** The collection names. */',
      `export type CollectionName = ${names.length > 0 ? names.map((n) => JSON.stringify(n)).join(' | ') : 'never'};`,
      '',
    ].join('\n'),
  ];
  for (const name of names) parts.push(renderCollection(schemas, name));
  parts.push(renderMap('CollectionRecords', 'Record types by collection name.', names.map((n) => [n, toTypeName(n, 'record')])));
  parts.push(renderMap('CollectionCreates', 'Create bodies by collection name.', names.map((n) => [n, toTypeName(n, 'create')])));
  parts.push(renderMap('CollectionUpdates', 'Update bodies by collection name.', names.map((n) => [n, toTypeName(n, 'update')])));
  const overloads = registry.collections.map((c) => {
    const keys = [c.name, c.id].map((k) => JSON.stringify(k)).join(' | ');
    const search = c.search === undefined ? '' : ', SearchListOptions';
    return `  collection(idOrName: ${keys}): TypedRecordService<${toTypeName(c.name, 'record')}, ${toTypeName(c.name, 'create')}, ${toTypeName(c.name, 'update')}${search}>;`;
  });
  parts.push(
    [
      '/** The list options of a collection with a search index (docs/search.md); elsewhere `search` is a 400. */',
      'export interface SearchListOptions extends RecordListOptions {',
      '  /** Words matched with the search index; `sort: \'-@rank\'` orders by relevance, `fields: \'title:highlight\'` marks the matches. */',
      '  search?: string;',
      '}',
      '',
      '/** A RecordService whose reads return R, whose create and update take the collection\'s bodies, and whose lists take L. */',
      "export type TypedRecordService<R, C, U, L extends RecordListOptions = RecordListOptions> = Omit<RecordService<R>, 'create' | 'update' | 'getList' | 'getFullList' | 'getFirstListItem'> & {",
      '  create<T = R>(bodyParams?: C | FormData, options?: RecordOptions): Promise<T>;',
      '  update<T = R>(id: string, bodyParams?: U | FormData, options?: RecordOptions): Promise<T>;',
      '  getList<T = R>(page?: number, perPage?: number, options?: L): Promise<ListResult<T>>;',
      '  getFullList<T = R>(options?: L & RecordFullListOptions): Promise<T[]>;',
      '  getFullList<T = R>(batch?: number, options?: L): Promise<T[]>;',
      '  getFirstListItem<T = R>(filter: string, options?: L): Promise<T>;',
      '};',
      '',
      "/** `new PocketBase(url) as TypedPocketBase`: then pb.collection('posts') is typed by name or id. */",
      // PocketBase's own generic collection() would be picked before these overloads in an intersection.
      "export type TypedPocketBase = Omit<PocketBase, 'collection'> & {",
      ...overloads,
      '  collection(idOrName: string): RecordService;',
      '};',
      '',
    ].join('\n'),
  );
  return parts.join('\n');
}
