import { isIP, type BlockList } from 'node:net';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { blockListOf, type RateLimitAction, type RateLimitSettings } from '../../db/rate-limits/rate-limit-settings.js';
import { RateLimitError } from '../../errors.js';
import type { Identity } from '../../auth/identity.js';
import type { Caller } from '../../records/caller.js';
import type { CallerResolver } from '../resolve-caller.js';
import type { Route } from '../route-table.js';
import { addressGroup } from './address-group.js';
import { RateLimitRuleMatcher, type RuleMatch } from './match-rate-limit-rule.js';
import type { CountedRule, RateLimiter } from './rate-limiter.js';

/** One request of a batch, as the guard counts it. */
export interface BatchedRequest {
  readonly action: 'create' | 'upsert' | 'update' | 'delete';
  readonly collection: string;
  readonly id?: string;
}

/** What the routes get from the rate limits (docs/limits.md, "Rate limits"). */
export interface RateLimitGuard {
  /** The router's caller resolver, once per request: the guard and the route's handler share one `auth()` call. */
  readonly resolveCaller: CallerResolver;
  /** The routes with the check in front of each one's handlers. */
  guard(routes: readonly Route[]): Route[];
  /** Counts a batch's requests (each against its own rule; all or none), after the batch request itself was counted: 429 when one overflows. */
  checkBatch(req: Request, res: Response, requests: readonly BatchedRequest[]): Promise<void>;
}

/** The records and files routes by method and path: the action a `collection:action` label names. */
const ACTIONS: Readonly<Record<string, RateLimitAction>> = {
  'GET /api/collections/:collection/records': 'list',
  'GET /api/collections/:collection/records/:id': 'view',
  'POST /api/collections/:collection/records': 'create',
  'PATCH /api/collections/:collection/records/:id': 'update',
  'DELETE /api/collections/:collection/records/:id': 'delete',
  'DELETE /api/collections/:collection/records': 'delete',
  'GET /api/files/:collection/:recordId/:filename': 'file',
  'HEAD /api/files/:collection/:recordId/:filename': 'file',
};
const BATCH_METHODS: Readonly<Record<BatchedRequest['action'], { method: string; action: RateLimitAction }>> = {
  create: { method: 'POST', action: 'create' },
  // Whether an upsert creates is known only once it runs: it counts as the create it may be.
  upsert: { method: 'PUT', action: 'create' },
  update: { method: 'PATCH', action: 'update' },
  delete: { method: 'DELETE', action: 'delete' },
};

/**
 * Builds the rate limits' check of requests: one rule per request (RateLimitRuleMatcher), counted
 * by the limiter for the request's client: its address group (`req.ip`, so Express's `trust
 * proxy` decides; an IPv6 /64 is one client) for `''` and `'@guest'` rules, its identity's id for
 * `'@auth'` ones. A superuser and an excluded address are not limited (as in PocketBase). Labels
 * use the path below the router's mount as the route reads it (literal segments as declared, the
 * decoded parameters), so `/API/Collections/...` or a %-escape count as the path they reach.
 * Downloads count as guests: their token may be a file token, which is not the host's to read.
 */
export function createRateLimitGuard(options: { settings: RateLimitSettings; limiter: RateLimiter; rules: readonly CountedRule[]; resolveCaller: CallerResolver }): RateLimitGuard {
  const { limiter } = options;
  const matcher = new RateLimitRuleMatcher(options.rules);
  const excluded = options.settings.excludedIps.length > 0 ? blockListOf(options.settings.excludedIps) : undefined;
  const resolveCaller: CallerResolver = (req) => {
    const kept = req as WithCaller;
    return (kept[CALLER] ??= options.resolveCaller(req));
  };
  /** The identity the limits see: a caller whose token auth() refused counts as the guest it is until its handler answers 401. */
  const identityOf = (req: Request): Promise<Identity | null> => resolveCaller(req).then((caller) => caller.request.auth, () => null);

  const refuse = (res: Response, seconds: number): never => {
    res.setHeader('Retry-After', String(seconds));
    throw new RateLimitError(seconds);
  };

  const clientOf = (req: Request, rule: CountedRule, identity: Identity | null) => (rule.audience === '@auth' && identity ? `@${identity.id}` : addressGroup(req.ip));

  function guardRoute(route: Route): Route {
    const action = ACTIONS[`${route.method} ${route.path}`];
    const segments = route.path.split('/').map((part) => (part.startsWith(':') ? { param: part.slice(1) } : { literal: part }));
    const readsIdentity = !(route.path.startsWith('/api/files/') || route.path.startsWith('/api/backups/')) || route.method === 'POST';
    const findRule = (req: Request, collection: string | undefined, authenticated: boolean): RuleMatch | undefined => {
      const path = segments.map((s) => ('literal' in s ? s.literal : ((req.params[s.param] as string | undefined) ?? ''))).join('/');
      const labels = collection === undefined ? [`${req.method} ${path}`, path] : [`${collection}:${action}`, `*:${action}`, `${req.method} ${path}`, path];
      return matcher.find(labels, { authenticated, collectionLabels: collection === undefined ? 0 : 2 });
    };
    // The rule depends on the method, the collection and the audience only, unless some label names
    // a path as deep as a parameter other than the collection (a record id): then it is found each time.
    const deep = segments.findIndex((s) => 'param' in s && s.param !== 'collection');
    const cache = deep < 0 || !options.rules.some((rule) => reachesSegment(rule.label, deep)) ? new Map<string, Map<string, (RuleMatch | null)[]>>() : undefined;
    /** Counts the request for `identity` (throws the 429), then goes on to the route. */
    const count = (req: Request, res: Response, next: NextFunction, identity: Identity | null) => {
      const collection = action === undefined ? undefined : (req.params.collection as string);
      const authenticated = identity !== null ? 1 : 0;
      let byCollection = cache?.get(req.method);
      if (cache && !byCollection) cache.set(req.method, (byCollection = new Map()));
      let found = byCollection?.get(collection ?? '');
      if (found?.[authenticated] === undefined) {
        found ??= [];
        found[authenticated] = findRule(req, collection, authenticated === 1) ?? null;
        // Collection names come from the client (a 404 later): at most MAX_CACHED of them per route.
        if (byCollection && byCollection.size < MAX_CACHED) byCollection.set(collection ?? '', found);
      }
      const match = found[authenticated];
      if (match) {
        const wait = limiter.take(match.rule, match.perCollection ? collection! : '', clientOf(req, match.rule, identity));
        if (wait > 0) refuse(res, wait);
      }
      next();
    };
    // Without an Authorization header the caller is a guest: counted at once, no promise on the way.
    const check: RequestHandler = (req, res, next) => {
      if (excluded !== undefined && isExcluded(excluded, req.ip)) return next();
      if (!readsIdentity || req.headers.authorization === undefined) return count(req, res, next, null);
      identityOf(req)
        .then((identity) => (identity?.superuser === true ? next() : count(req, res, next, identity)))
        .catch(next);
    };
    return { ...route, handlers: [check, ...route.handlers] };
  }

  return {
    resolveCaller,
    guard: (routes) => routes.map(guardRoute),
    async checkBatch(req, res, requests) {
      if (excluded !== undefined && isExcluded(excluded, req.ip)) return;
      const identity = await identityOf(req);
      if (identity?.superuser === true) return;
      const hits = [];
      for (const request of requests) {
        const { method, action } = BATCH_METHODS[request.action];
        const path = `/api/collections/${request.collection}/records${request.id === undefined ? '' : `/${request.id}`}`;
        const match = matcher.find([`${request.collection}:${action}`, `*:${action}`, `${method} ${path}`, path], { authenticated: identity !== null, collectionLabels: 2 });
        if (match) hits.push({ rule: match.rule, scope: match.perCollection ? request.collection : '', client: clientOf(req, match.rule, identity) });
      }
      const wait = hits.length === 0 ? 0 : limiter.takeAll(hits);
      if (wait > 0) refuse(res, wait);
    },
  };
}

/**
 * Where a request keeps its caller, resolved once for the limits and the route: a symbol property
 * of the request, as its database context is (request-database-context.ts). A WeakMap from each
 * request to its caller's promise made the young generation's collections slower: a rule that
 * never trips tripled the collector's time on a view (docs/benchmarks.md, "Issue 44's cost"). Why
 * this one costs and the request log's WeakMap of small notes does not was measured, not explained.
 */
const CALLER = Symbol('recordbase.caller');
type WithCaller = Request & { [CALLER]?: Promise<Caller> };

/** Collections whose rule one route keeps found. */
const MAX_CACHED = 1_000;

/** Whether a path label (`/api/...` or `GET /api/...`) names a segment at `index` or deeper, so that its match depends on what is there. */
function reachesSegment(label: string, index: number): boolean {
  const space = label.indexOf(' ');
  const path = label.startsWith('/') ? label : space > 0 ? label.slice(space + 1) : '';
  return path.split('/').slice(index).some((segment) => segment !== '');
}

/** Whether `ip` is one of `rateLimits.excludedIps` (an IPv4-mapped IPv6 address as its IPv4 one). */
function isExcluded(list: BlockList, ip: string | undefined): boolean {
  if (ip === undefined) return false;
  const plain = ip.startsWith('::ffff:') && ip.includes('.') ? ip.slice(7) : ip.split('%')[0]!;
  const family = isIP(plain);
  return family !== 0 && list.check(plain, family === 4 ? 'ipv4' : 'ipv6');
}
