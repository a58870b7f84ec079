/**
 * The OpenAPI 3.1 document of a router's collections (docs/openapi.md): every records and files
 * path, per collection record, list, create and update schemas, the list parameters, the error
 * body and its statuses, and the token sources as security schemes. Pure: the checked schema
 * registry in, a JSON-ready object out; the same registry and options give the same bytes.
 * Hidden fields appear nowhere: the document is what a non-superuser may see.
 */
import { createHash } from 'node:crypto';
import type { CollectionSchema, FieldSchema, SchemaRegistry } from '../schema/collection-schema.js';
import { DEFAULT_PER_PAGE } from '../query/default-per-page.js';
import { DEFAULT_RECORD_ID_FORMAT, describeNewRecordId, describeStoredRecordId, OPTIONAL_RECORD_ID_PATTERN, OPTIONAL_SAFE_RECORD_ID_PATTERN, RECORD_ID_PATTERN, SAFE_RECORD_ID_PATTERN } from '../schema/record-id.js';
import { describeFieldSchemas, RECORD_DATE_PATTERN, type FieldSchemas, type JsonSchema } from './describe-field-schemas.js';
import { describeAggregatePath, describeAggregateSchemas, describeListSearchParameters } from './describe-search-and-aggregates.js';
import { ERROR_RESPONSES, responses } from './error-responses.js';
import { listShapeSchema } from './list-shape.js';
import { toBaseTypeName, toTypeName } from './type-names.js';

/** An OpenAPI document as plain JSON data. */
export type OpenApiDocument = { [key: string]: unknown };

/** What the document says beyond the collections themselves. */
export interface OpenApiOptions {
  /** `servers[0].url`: where the router is mounted. Default `/`. */
  serverUrl?: string;
  /** `info.title`. Default `recordbase`. */
  title?: string;
  /**
   * The limits the router enforces, quoted in descriptions: its resolved options
   * (lib/options.ts), so that the document never states a default of its own.
   */
  limits: { maxPerPage: number; maxFileSize: number; maxBodySize: number; maxAggregateGroups: number };
  /** The router's `multipartUpdate` option, which decides what a multipart update clears. */
  multipartUpdate: 'replace' | 'merge';
}

const JSON_TYPE = 'application/json';
const ERROR_REF = { $ref: '#/components/schemas/ErrorBody' };
/** Who may call a records route: anyone; a token is optional and goes to the host's auth(). */
const OPTIONAL_TOKEN = [{}, { bearerToken: [] }, { rawToken: [] }];
/** File downloads also take the `pb_session` cookie and `?token=` (a file token or any other). */
const OPTIONAL_FILE_TOKEN = [...OPTIONAL_TOKEN, { sessionCookie: [] }, { queryToken: [] }];

function ref(name: string): { $ref: string } {
  return { $ref: `#/components/schemas/${name}` };
}

function jsonContent(schema: unknown): { content: Record<string, unknown> } {
  return { content: { [JSON_TYPE]: { schema } } };
}

/** How a rule reads in an operation's description; the expression itself stays private. */
function describeRule(rule: string | null): string {
  if (rule === null) return 'superusers only';
  if (rule === '') return 'everyone';
  return "callers the collection's rule admits (superusers always)";
}

/** What a list's filter and sort make of fields with a view rule of their own (DESIGN 24); "" without any. */
function describeGuardedFilter(fields: ReadonlyMap<FieldSchema, FieldSchemas>): string {
  const guarded = [...fields.keys()].filter((f) => f.rules?.view !== undefined).map((f) => `\`${f.name}\``);
  if (guarded.length === 0) return '';
  return ` In filter and sort, ${guarded.join(', ')} read${guarded.length === 1 ? 's' : ''} as empty on each record whose field view rule refuses the caller.`;
}

/** The fields a non-superuser sees, in declaration order. */
function visibleFields(collection: CollectionSchema): FieldSchema[] {
  return collection.fields.filter((f) => !f.system && !f.hidden);
}

/** What `expand` may name on a collection: its relation fields, then back-relations (`comments_via_post`). */
function listExpandables(registry: SchemaRegistry, collection: CollectionSchema): { name: string; target: string; multiple: boolean }[] {
  const out = visibleFields(collection)
    .filter((f) => f.relationTo !== undefined)
    .map((f) => ({ name: f.name, target: f.relationTo!, multiple: f.multiple }));
  for (const back of registry.backRelations(collection)) {
    if (back.field.hidden) continue;
    out.push({ name: `${back.collection.name}_via_${back.field.name}`, target: back.collection.name, multiple: true });
  }
  return out;
}

function buildRecordSchema(registry: SchemaRegistry, collection: CollectionSchema, fields: ReadonlyMap<FieldSchema, FieldSchemas>): JsonSchema {
  const expand = Object.fromEntries(
    listExpandables(registry, collection).map((e) => {
      const target = ref(toTypeName(e.target, 'record'));
      return [e.name, e.multiple ? { type: 'array', items: target } : target];
    }),
  );
  const properties: [string, unknown][] = [
    ['collectionId', { type: 'string', const: collection.id }],
    ['collectionName', { type: 'string', const: collection.name }],
    ['id', describeStoredRecordId(collection.recordId)],
    ...[...fields].map(([field, schemas]): [string, unknown] => [field.name, schemas.record]),
    ['created', { type: 'string', pattern: RECORD_DATE_PATTERN, description: 'YYYY-MM-DD hh:mm:ss.mmmZ (UTC).' }],
    ['updated', { type: 'string', pattern: RECORD_DATE_PATTERN, description: 'YYYY-MM-DD hh:mm:ss.mmmZ (UTC).' }],
  ];
  // A field with a view rule of its own may be absent from a record (DESIGN 24).
  const guarded = new Set([...fields.keys()].filter((f) => f.rules?.view !== undefined).map((f) => f.name));
  const required = properties.map(([name]) => name).filter((name) => !guarded.has(name));
  if (Object.keys(expand).length > 0) {
    properties.push([
      'expand',
      { type: 'object', description: 'Present when `expand` asked for relations; a related record the caller may not view is left out.', properties: expand },
    ]);
  }
  return {
    type: 'object',
    description: `A ${collection.name} record. Every ${guarded.size > 0 ? 'required ' : ''}property is present unless the \`fields\` parameter narrowed the response.`,
    required,
    properties: Object.fromEntries(properties),
  };
}

/** A create or update body schema from each field's part. */
function buildInputSchema(options: {
  fields: ReadonlyMap<FieldSchema, FieldSchemas>;
  pick: (schemas: FieldSchemas) => JsonSchema | undefined;
  modifiers?: (schemas: FieldSchemas) => FieldSchemas['updateModifiers'];
  requireRequired: boolean;
  /** The collection's id settings on a create; absent on an update. */
  withId?: CollectionSchema['recordId'];
  form: boolean;
  description: string;
}): JsonSchema {
  const properties: [string, unknown][] = [];
  const required: string[] = [];
  if (options.withId) properties.push(['id', describeIdInput(options.withId)]);
  for (const [field, schemas] of options.fields) {
    const schema = options.pick(schemas);
    if (schema === undefined) continue;
    properties.push([field.name, schema]);
    if (options.requireRequired && field.required && schemas.filledOnCreate !== true) required.push(field.name);
  }
  if (options.modifiers) {
    for (const [, schemas] of options.fields) {
      for (const modifier of options.modifiers(schemas)) properties.push([modifier.key, modifier.schema]);
    }
  }
  if (options.form) {
    properties.push([
      '@jsonPayload',
      { type: 'string', contentMediaType: JSON_TYPE, description: 'A JSON object merged over the other parts: how the SDK sends arrays, objects and nulls. It may be repeated.' },
    ]);
  }
  const schema: JsonSchema = { type: 'object', description: options.description };
  if (required.length > 0) schema.required = required;
  schema.properties = Object.fromEntries(properties);
  return schema;
}

/** The multipart `encoding` for file fields with allowed types, and for `@jsonPayload`. */
function buildFormEncoding(fields: ReadonlyMap<FieldSchema, FieldSchemas>): Record<string, unknown> {
  const entries: [string, unknown][] = [];
  for (const [field, schemas] of fields) {
    if (schemas.fileContentTypes !== undefined) entries.push([field.name, { contentType: schemas.fileContentTypes.join(', ') }]);
  }
  entries.push(['@jsonPayload', { contentType: JSON_TYPE }]);
  return Object.fromEntries(entries);
}

function buildComponentSchemas(registry: SchemaRegistry, options: { multipartUpdate: 'replace' | 'merge' }): Record<string, unknown> {
  const schemas: [string, unknown][] = [
    [
      'ErrorBody',
      {
        type: 'object',
        description: 'Every error has this body.',
        required: ['status', 'message', 'data'],
        properties: {
          status: { type: 'integer', description: 'The HTTP status again.' },
          message: { type: 'string' },
          data: { type: 'object', description: 'Empty, except for validation errors (422): keyed by field.', additionalProperties: ref('FieldError') },
        },
      },
    ],
    ['FieldError', { type: 'object', required: ['code', 'message'], properties: { code: { type: 'string', description: 'validation_required, validation_max_text_constraint, ... (docs/errors.md)' }, message: { type: 'string' } } }],
    ['DeletedCount', { type: 'object', required: ['deleted'], properties: { deleted: { type: 'integer', minimum: 0, description: 'How many records were deleted.' } } }],
    ['FileToken', { type: 'object', required: ['token'], properties: { token: { type: 'string', description: 'A file token for ?token=, valid for 180 seconds.' } } }],
  ];
  const replaceNote =
    options.multipartUpdate === 'replace'
      ? ' In multipart, fields not sent are cleared (send every field to keep); a file field keeps only the files sent.'
      : ' Only the fields sent change.';
  for (const collection of registry.collections) {
    const fields = describeCollectionFields(registry, collection);
    const hasFiles = [...fields.keys()].some((f) => f.type === 'file');
    const name = collection.name;
    const record = buildRecordSchema(registry, collection, fields);
    schemas.push([toTypeName(name, 'record'), record]);
    schemas.push([toTypeName(name, 'list'), listShapeSchema(toTypeName(name, 'record'), { totalItems: '-1 with skipTotal.', totalPages: '-1 with skipTotal.' })]);
    schemas.push(...describeAggregateSchemas(collection, record));
    // A view collection is read-only: it has no write bodies.
    if (collection.type === 'view') continue;
    schemas.push([
      toTypeName(name, 'create'),
      buildInputSchema({ fields, pick: (s) => s.create, requireRequired: true, withId: collection.recordId, form: false, description: `A new ${name} record as JSON.${hasFiles ? ' Files need multipart.' : ''}` }),
    ]);
    schemas.push([
      toTypeName(name, 'update'),
      buildInputSchema({ fields, pick: (s) => s.update, modifiers: (s) => s.updateModifiers, requireRequired: false, form: false, description: `Changes to a ${name} record as JSON: only the fields sent change.` }),
    ]);
    if (hasFiles) {
      schemas.push([
        toTypeName(name, 'createForm'),
        buildInputSchema({ fields, pick: (s) => s.createForm, requireRequired: true, withId: collection.recordId, form: true, description: `A new ${name} record as multipart: one part per field, files as file parts.` }),
      ]);
      schemas.push([
        toTypeName(name, 'updateForm'),
        buildInputSchema({
          fields,
          pick: (s) => s.updateForm,
          modifiers: (s) => s.updateFormModifiers,
          requireRequired: false,
          form: true,
          description: `Changes to a ${name} record as multipart.${replaceNote}`,
        }),
      ]);
    }
  }
  return Object.fromEntries(schemas);
}

function describeCollectionFields(registry: SchemaRegistry, collection: CollectionSchema): Map<FieldSchema, FieldSchemas> {
  return new Map(visibleFields(collection).map((f) => [f, withTargetIds(registry, f, describeFieldSchemas(f))]));
}

/** A create's `id`: the collection's settings; optional, since without it one is generated (or, with no autogeneratePattern, required by a 422). */
function describeIdInput(format: CollectionSchema['recordId']): JsonSchema {
  const id: JsonSchema = describeNewRecordId(format);
  const generated = format.autogeneratePattern === '' ? 'Required: this collection generates no ids.' : 'Optional: a valid unused id; otherwise one is generated.';
  return { ...id, description: typeof id.description === 'string' ? `${generated} ${id.description}` : generated };
}

/**
 * A relation field describes the default id (lib/schema/fields/relation.ts); one whose target
 * declares its own id field takes any safe id instead, as validation does (existence in the target
 * decides the rest).
 */
function withTargetIds(registry: SchemaRegistry, field: FieldSchema, schemas: FieldSchemas): FieldSchemas {
  if (field.relationTo === undefined || registry.get(field.relationTo)?.recordId === DEFAULT_RECORD_ID_FORMAT) return schemas;
  const swap = (value: unknown): unknown => {
    if (value === RECORD_ID_PATTERN) return SAFE_RECORD_ID_PATTERN;
    if (value === OPTIONAL_RECORD_ID_PATTERN) return OPTIONAL_SAFE_RECORD_ID_PATTERN;
    if (Array.isArray(value)) return value.map(swap);
    if (typeof value === 'object' && value !== null) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, swap(v)]));
    return value;
  };
  return swap(schemas) as FieldSchemas;
}

function buildParameters(limits: OpenApiOptions['limits']): Record<string, unknown> {
  const query = (name: string, schema: JsonSchema, description: string) => ({ name, in: 'query', required: false, description, schema });
  return {
    page: query('page', { type: 'integer', minimum: 1, default: 1 }, 'The page, from 1.'),
    perPage: query('perPage', { type: 'integer', minimum: 1, default: DEFAULT_PER_PAGE }, `Records per page; capped at ${limits.maxPerPage} (the response echoes the capped value).`),
    skipTotal: query('skipTotal', { type: 'boolean', default: false }, '`true` (or `1`, as the SDK sends it) skips the count: totalItems and totalPages are -1.'),
    filter: query('filter', { type: 'string', maxLength: 3500 }, "A filter expression, e.g. `title ~ 'news' && views > 10` (docs/query-language.md). Hidden fields cannot be used."),
    sort: query('sort', { type: 'string' }, 'Comma-separated fields, `-` for descending, `@random`; at most 8. Default: created, then id.'),
    fields: query('fields', { type: 'string' }, 'Comma-separated fields to return (`*`, `expand.rel.field`, `field:excerpt(n,true)`); the others are left out.'),
    recordId: { name: 'id', in: 'path', required: true, description: 'The record id.', schema: { type: 'string' } },
  };
}

/** The `expand` parameter of one collection, naming what it may expand. */
function expandParameter(registry: SchemaRegistry, collection: CollectionSchema): Record<string, unknown> {
  const names = listExpandables(registry, collection).map((e) => `\`${e.name}\``);
  const which = names.length > 0 ? ` Here: ${names.join(', ')}.` : ' This collection has no relations to expand.';
  return {
    name: 'expand',
    in: 'query',
    required: false,
    description: `Comma-separated relations to include under \`expand\`, dot-nested up to 6 levels.${which}`,
    schema: { type: 'string' },
  };
}

const PAGE_PARAMETERS = ['page', 'perPage', 'skipTotal'].map((p) => ({ $ref: `#/components/parameters/${p}` }));

function buildCollectionPaths(registry: SchemaRegistry, collection: CollectionSchema, options: { multipartUpdate: 'replace' | 'merge'; maxAggregateGroups: number }): [string, unknown][] {
  const name = collection.name;
  const type = toBaseTypeName(name);
  const rules = collection.rules;
  const expand = expandParameter(registry, collection);
  const shape = [{ $ref: '#/components/parameters/fields' }, expand];
  const record = ref(toTypeName(name, 'record'));
  const fields = describeCollectionFields(registry, collection);
  const hasFiles = [...fields.keys()].some((f) => f.type === 'file');
  const body = (json: string, form: string) => {
    const formBody: Record<string, unknown> = { schema: ref(hasFiles ? form : json) };
    if (hasFiles) formBody.encoding = buildFormEncoding(fields);
    return { required: true, content: { [JSON_TYPE]: { schema: ref(json) }, 'multipart/form-data': formBody } };
  };
  const tags = [name];
  const idParameter = { $ref: '#/components/parameters/recordId' };
  const paths: [string, unknown][] = [
    [
      `/api/collections/${name}/records`,
      {
        get: {
          tags,
          operationId: `list${type}`,
          summary: `List ${name} records`,
          description: `Rule: ${describeRule(rules.list)}; records the rule refuses are left out of the list.${describeGuardedFilter(fields)}`,
          parameters: [...PAGE_PARAMETERS, ...describeListSearchParameters(collection), expand],
          responses: responses({ 200: { description: 'One page of records.', ...jsonContent(ref(toTypeName(name, 'list'))) } }, ['BadRequest', 'Unauthorized', 'Forbidden']),
        },
        post: {
          tags,
          operationId: `create${type}`,
          summary: `Create a ${name} record`,
          description: `Rule: ${describeRule(rules.create)}.`,
          parameters: shape,
          requestBody: body(toTypeName(name, 'create'), toTypeName(name, 'createForm')),
          responses: responses({ 200: { description: 'The created record.', ...jsonContent(record) } }, ['BadRequest', 'Unauthorized', 'Forbidden', 'PayloadTooLarge', 'ValidationFailed']),
        },
        delete: {
          tags,
          operationId: `bulkDelete${type}`,
          summary: `Delete the ${name} records a filter selects`,
          description: `Rule: ${describeRule(rules.delete)}. Selects filter AND the list rule; if the delete rule refuses any selected record, nothing is deleted (403). Otherwise all go in one transaction.`,
          parameters: [{ name: 'filter', in: 'query', required: true, description: 'Which records to delete (required, not empty).', schema: { type: 'string', minLength: 1, maxLength: 3500 } }],
          responses: responses({ 200: { description: 'How many were deleted.', ...jsonContent(ref('DeletedCount')) } }, ['BadRequest', 'Unauthorized', 'Forbidden']),
        },
      },
    ],
    [
      `/api/collections/${name}/records/{id}`,
      {
        parameters: [idParameter],
        get: {
          tags,
          operationId: `view${type}`,
          summary: `View a ${name} record`,
          description: `Rule: ${describeRule(rules.view)}; a record the rule refuses is a 404.`,
          parameters: shape,
          responses: responses({ 200: { description: 'The record.', ...jsonContent(record) } }, ['BadRequest', 'Unauthorized', 'Forbidden', 'NotFound']),
        },
        patch: {
          tags,
          operationId: `update${type}`,
          summary: `Update a ${name} record`,
          description: `Rule: ${describeRule(rules.update)}; a record the rule refuses is a 404.${options.multipartUpdate === 'replace' ? ' A multipart update clears the fields it does not send (docs/files.md).' : ''}`,
          parameters: shape,
          requestBody: body(toTypeName(name, 'update'), toTypeName(name, 'updateForm')),
          responses: responses({ 200: { description: 'The updated record.', ...jsonContent(record) } }, ['BadRequest', 'Unauthorized', 'Forbidden', 'NotFound', 'PayloadTooLarge', 'ValidationFailed']),
        },
        delete: {
          tags,
          operationId: `delete${type}`,
          summary: `Delete a ${name} record and its files`,
          description: `Rule: ${describeRule(rules.delete)}; a record the rule refuses is a 404. References to it are removed, or their records deleted where the relation cascades; a required relation without cascade blocks the delete (400).`,
          responses: responses({ 204: { description: 'Deleted.' } }, ['BadRequest', 'Unauthorized', 'Forbidden', 'NotFound']),
        },
      },
    ],
  ];
  if (collection.type === 'view') for (const [, item] of paths) onlyReads(item as Record<string, unknown>);
  paths.push(describeAggregatePath(collection, { record: buildRecordSchema(registry, collection, fields), rule: describeRule(rules.list), maxAggregateGroups: options.maxAggregateGroups }));
  if (hasFiles) paths.push([`/api/files/${name}/{recordId}/{filename}`, buildDownloadPath(collection, type)]);
  return paths;
}

/** A view collection's path item: its reads only (its writes answer 400, docs/collections.md). */
function onlyReads(item: Record<string, unknown>): void {
  for (const method of ['post', 'patch', 'delete']) delete item[method];
}

function buildDownloadPath(collection: CollectionSchema, type: string): Record<string, unknown> {
  const fileFields = visibleFields(collection).filter((f) => f.type === 'file');
  const sizes = fileFields
    .map((f) => (f.definition?.type === 'file' && f.definition.thumbs?.length ? `${f.name}: ${f.definition.thumbs.join(', ')}` : undefined))
    .filter((s) => s !== undefined);
  const protectedFields = fileFields.filter((f) => f.definition?.type === 'file' && f.definition.protected === true).map((f) => f.name);
  const access =
    protectedFields.length > 0
      ? `Protected fields (${protectedFields.join(', ')}) need an identity that passes the view rule (${describeRule(collection.rules.view)}): a token in the Authorization header, the pb_session cookie or ?token= (a file token from POST /api/files/token); the others are public.`
      : 'Public: no token needed.';
  const query = (name: string, schema: JsonSchema, description: string, extra: object = {}) => ({ name, in: 'query', required: false, description, schema, ...extra });
  const file = {
    200: {
      description: 'The file (or its thumbnail).',
      headers: {
        ETag: { schema: { type: 'string' } },
        'Content-Disposition': { description: 'inline for safe media types, attachment otherwise or with download.', schema: { type: 'string' } },
      },
      content: { '*/*': { schema: { type: 'string', format: 'binary' } } },
    },
    206: { description: 'The requested byte range.', content: { '*/*': { schema: { type: 'string', format: 'binary' } } } },
    304: { description: 'Not modified (If-None-Match / If-Modified-Since).' },
  };
  const operation = (method: 'get' | 'head') => ({
    tags: ['files'],
    operationId: `${method === 'get' ? 'download' : 'inspect'}${type}File`,
    summary: method === 'get' ? `Download a file of a ${collection.name} record` : 'The headers of a download, without the body',
    description: `${access} Thumbnails are made for png, jpeg, gif and webp originals; other files are served as they are.`,
    security: OPTIONAL_FILE_TOKEN,
    parameters: [
      query('thumb', { type: 'string', pattern: '^[0-9]{1,4}x[0-9]{1,4}[tbf]?$' }, `A thumbnail size WxH (crop), 0xH or Wx0 (proportional), WxHt/WxHb (crop anchored top/bottom), WxHf (fit); sides up to 2048.${sizes.length > 0 ? ` Allowed sizes: ${sizes.join('; ')}.` : ''}`),
      query('center', { type: 'boolean' }, 'Crop from the centre (a flag: its presence counts).', { allowEmptyValue: true }),
      query('stretch', { type: 'boolean' }, 'Stretch to the exact size (a flag: its presence counts).', { allowEmptyValue: true }),
      query('quality', { type: 'integer', minimum: 0, maximum: 100 }, 'Thumbnail quality.'),
      query('format', { type: 'string', enum: ['webp', 'jpeg', 'png'] }, 'Thumbnail format; default the original\'s (gif becomes png).'),
      query('download', { type: 'string' }, 'Any value but 0 or false: Content-Disposition attachment.'),
      { name: 'Range', in: 'header', required: false, description: 'A byte range: bytes=0-1023.', schema: { type: 'string' } },
    ],
    responses: responses(
      method === 'get' ? file : Object.fromEntries(Object.entries(file).map(([status, r]) => [status, { description: r.description }])),
      ['BadRequest', 'Unauthorized', 'NotFound', 'RangeNotSatisfiable'],
    ),
  });
  return {
    parameters: [
      { name: 'recordId', in: 'path', required: true, description: 'The record id.', schema: { type: 'string' } },
      { name: 'filename', in: 'path', required: true, description: `A stored file name from one of: ${fileFields.map((f) => f.name).join(', ')}.`, schema: { type: 'string' } },
    ],
    get: operation('get'),
    head: operation('head'),
  };
}

/**
 * Builds the OpenAPI 3.1 document of the collections. `info.version` is a hash of everything
 * else, so a client can tell that the collections changed.
 */
export function buildOpenApiDocument(registry: SchemaRegistry, options: OpenApiOptions): OpenApiDocument {
  const { limits, multipartUpdate } = options;
  const paths: [string, unknown][] = registry.collections.flatMap((c) => buildCollectionPaths(registry, c, { multipartUpdate, maxAggregateGroups: limits.maxAggregateGroups }));
  paths.push([
    '/api/files/token',
    {
      post: {
        tags: ['files'],
        operationId: 'getFileToken',
        summary: 'A short-lived file token',
        description:
          'A token for ?token= on protected file URLs, valid for 180 seconds, so that a long-lived token need not sit in a URL. Without a body (as the SDK sends it) it also downloads backups for a superuser; with {"scope": "files"} it opens protected files only (what a page should put in its image URLs).',
        security: [{ bearerToken: [] }, { rawToken: [] }],
        requestBody: {
          required: false,
          content: { [JSON_TYPE]: { schema: { type: 'object', properties: { scope: { type: 'string', enum: ['files'], description: 'files: a token that opens protected files and nothing else.' } } } } },
        },
        responses: responses({ 200: { description: 'The token.', ...jsonContent(ref('FileToken')) } }, ['Unauthorized']),
      },
    },
  ]);
  const components = {
    schemas: buildComponentSchemas(registry, { multipartUpdate }),
    parameters: buildParameters(limits),
    responses: Object.fromEntries(
      Object.entries(ERROR_RESPONSES).map(([name, r]) => [name, { description: r.description, content: { [JSON_TYPE]: { schema: ERROR_REF, example: r.example } } }]),
    ),
    securitySchemes: {
      bearerToken: { type: 'http', scheme: 'bearer', description: "Authorization: Bearer <token>; the token goes to the host's auth()." },
      rawToken: { type: 'apiKey', in: 'header', name: 'Authorization', description: 'Authorization: <token>, without Bearer, as the pocketbase SDK sends it.' },
      sessionCookie: { type: 'apiKey', in: 'cookie', name: 'pb_session', description: 'File downloads only.' },
      queryToken: { type: 'apiKey', in: 'query', name: 'token', description: 'File downloads only: a file token (POST /api/files/token) or any token auth() accepts.' },
    },
  };
  const tags = [
    ...registry.collections.map((c) => ({ name: c.name, description: `Records of ${c.name} (collection id ${c.id}).` })),
    { name: 'files', description: 'File downloads, thumbnails and file tokens.' },
  ];
  const body = { paths: Object.fromEntries(paths), components };
  const version = createHash('sha256').update(JSON.stringify({ tags, ...body })).digest('hex').slice(0, 12);
  return {
    openapi: '3.1.0',
    info: {
      title: options.title ?? 'recordbase',
      version,
      description: `Records and files of ${registry.collections.length} collection(s), served by recordbase with PocketBase's REST interface. Limits: bodies up to ${limits.maxBodySize} bytes, files up to ${limits.maxFileSize} bytes.`,
    },
    servers: [{ url: options.serverUrl ?? '/' }],
    security: OPTIONAL_TOKEN,
    tags,
    ...body,
  };
}

/** The document as the command and the route print it: two-space JSON and a final newline. */
export function renderOpenApiDocument(document: OpenApiDocument): string {
  return JSON.stringify(document, null, 2) + '\n';
}
