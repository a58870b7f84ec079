import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { RequestHandler } from 'express';
import type { Identity } from '../auth/identity.js';
import { ForbiddenError, NotFoundError, UnauthorizedError } from '../errors.js';
import type { CollectionSchema, FieldSchema, SchemaRegistry } from '../schema/collection-schema.js';
import { automaticIndexes } from '../schema/plan-migration.js';
import type { CallerResolver } from './resolve-caller.js';
import type { Route } from './route-table.js';

/**
 * The headers of every dashboard response: a policy under which only the dashboard's own files
 * run (no inline script or style, nothing from another origin), no framing, no sniffing, no
 * Referer (a page URL could carry a file token).
 */
export const DASHBOARD_HEADERS: Readonly<Record<string, string>> = {
  'Content-Security-Policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'X-Frame-Options': 'DENY',
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
};

/** A built asset's name carries its content hash, so a release never reuses a name: cache it for good. */
const IMMUTABLE = 'public, max-age=31536000, immutable';
const CONTENT_TYPES: Readonly<Record<string, string>> = { '.js': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8' };

/** The built dashboard in memory: index.html and the hashed assets by name. */
interface DashboardFiles {
  readonly index: Buffer;
  readonly assets: ReadonlyMap<string, { body: Buffer; type: string }>;
}

/**
 * Where `npm run build` writes the dashboard (scripts/build-dashboard.mjs): `dist/dashboard`,
 * beside `dist/lib`. Under Jest this module runs from its TypeScript source in lib/, whose
 * package root holds dist/.
 */
export function builtDashboardDir(moduleUrl: string = import.meta.url): string {
  return fileURLToPath(new URL(moduleUrl.endsWith('.ts') ? '../../dist/dashboard/' : '../../dashboard/', moduleUrl));
}

/** Reads the built dashboard once; a missing build is said in so many words (the router then answers 503 with it). */
function loadDashboardFiles(dir: string): DashboardFiles {
  let index: Buffer;
  try {
    index = readFileSync(path.join(dir, 'index.html'));
  } catch {
    throw new Error(`The dashboard is not built: ${dir} has no index.html (run npm run build).`);
  }
  const assets = new Map<string, { body: Buffer; type: string }>();
  for (const name of readdirSync(path.join(dir, 'assets'))) {
    const type = CONTENT_TYPES[path.extname(name)];
    if (type) assets.set(name, { body: readFileSync(path.join(dir, 'assets', name)), type });
  }
  return { index, assets };
}

/** 401 for a guest (no token, or one auth() does not know); the identity otherwise. */
function requireIdentity(identity: Identity | null): Identity {
  if (!identity) throw new UnauthorizedError('The dashboard needs a token: sign in through the host application.');
  return identity;
}

/** A field as the dashboard reads it: the hints every field has, then its type's own settings. */
function describeField(field: FieldSchema): Record<string, unknown> {
  const { name: _name, type: _type, required: _required, hidden: _hidden, ...settings } = (field.definition ?? {}) as Record<string, unknown>;
  return {
    name: field.name,
    type: field.type,
    system: field.system,
    required: field.required,
    hidden: field.hidden,
    multiple: field.multiple,
    presentable: false,
    help: '',
    ...settings,
  };
}

/**
 * A collection's schema for superusers: fields, indexes and rules, as declared in code, and the
 * indexes the schema sync creates without asking (a view has none).
 */
function describeCollection(collection: CollectionSchema): Record<string, unknown> {
  return {
    id: collection.id,
    name: collection.name,
    type: collection.type,
    fields: collection.fields.map(describeField),
    indexes: collection.indexes.map((index) => ({ name: index.name, unique: index.unique, columns: index.columns })),
    automaticIndexes: collection.type === 'view' ? [] : automaticIndexes(collection),
    // The records view offers its search box where a search index exists (docs/search.md).
    ...(collection.search === undefined ? {} : { search: { index: collection.search.index, fields: collection.search.columns.map((c) => collection.fields.find((f) => f.column === c)?.name ?? c), language: collection.search.language } }),
    rules: collection.rules,
    ...(collection.viewQuery === undefined ? {} : { viewQuery: collection.viewQuery }),
  };
}

/** The dashboard's paths below the mount (off, each is a 404). */
const DASHBOARD_PATHS = ['/_', '/_/:name', '/_/assets/:name', '/_/api/whoami', '/_/api/collections'] as const;
type DashboardPath = (typeof DASHBOARD_PATHS)[number];

/** What the dashboard routes need from the router. */
export interface DashboardRoutesOptions {
  /** Option `dashboard`: off, every path of the dashboard is the router's JSON 404. */
  enabled: boolean;
  registry: SchemaRegistry;
  /** Who is calling, from the Authorization header (the same resolver as the records API). */
  resolveCaller: CallerResolver;
  /** The built files' folder; default builtDashboardDir(). */
  dir?: string;
}

/**
 * The dashboard (docs/dashboard.md) at `/_/`: its page, its hashed assets, and two small
 * endpoints the public API lacks, `/_/api/whoami` (is this token a superuser's?) and
 * `/_/api/collections` (the schema, superusers only). Everything else the page does goes
 * through the public API with the caller's token.
 */
export function createDashboardRoutes(options: DashboardRoutesOptions): Route[] {
  if (!options.enabled) {
    const off: RequestHandler = () => {
      throw new NotFoundError('The dashboard is off: createRecordsRouter({ dashboard: true }) serves it (see docs/dashboard.md).', 'route_not_found');
    };
    return DASHBOARD_PATHS.map((p) => ({ method: 'GET', path: p, handlers: [off] }));
  }
  const files = loadDashboardFiles(options.dir ?? builtDashboardDir());
  const { resolveCaller } = options;

  const secure: RequestHandler = (_req, res, next) => {
    res.set(DASHBOARD_HEADERS);
    next();
  };
  const page: RequestHandler = (req, res) => {
    // `{mount}/_` and `{mount}/_/` reach this one route; relative URLs in the page need the slash.
    if (!req.originalUrl.split('?')[0]!.endsWith('/')) {
      res.redirect(308, '_/');
      return;
    }
    res.set('Cache-Control', 'no-cache').type('text/html; charset=utf-8').send(files.index);
  };
  const asset: RequestHandler = (req, res) => {
    const found = files.assets.get(req.params.name as string);
    if (!found) throw new NotFoundError('The dashboard has no such file.', 'not_found');
    res.set('Cache-Control', IMMUTABLE).type(found.type).send(found.body);
  };
  const unknown: RequestHandler = () => {
    throw new NotFoundError('The dashboard has no such page.', 'not_found');
  };
  const whoami: RequestHandler = async (req, res) => {
    const identity = requireIdentity((await resolveCaller(req)).request.auth);
    res.set('Cache-Control', 'no-store').json({ superuser: identity.superuser === true, id: identity.id });
  };
  const collections: RequestHandler = async (req, res) => {
    const identity = requireIdentity((await resolveCaller(req)).request.auth);
    if (identity.superuser !== true) throw new ForbiddenError('Only superusers may read the collections through the dashboard.');
    res.set('Cache-Control', 'no-store').json(options.registry.collections.map(describeCollection));
  };

  const handlerAt: Record<DashboardPath, RequestHandler> = {
    '/_': page,
    '/_/:name': unknown,
    '/_/assets/:name': asset,
    '/_/api/whoami': whoami,
    '/_/api/collections': collections,
  };
  return DASHBOARD_PATHS.map((p) => ({ method: 'GET', path: p, handlers: [secure, handlerAt[p]] }));
}
