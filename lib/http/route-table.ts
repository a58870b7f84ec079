import type { NextFunction, Request, RequestHandler, Response } from 'express';

/** One endpoint of the router: a method, a path pattern (`/api/collections/:collection/records`) and its handlers, run in order. */
export interface Route {
  readonly method: 'GET' | 'HEAD' | 'POST' | 'PATCH' | 'DELETE';
  readonly path: string;
  readonly handlers: readonly RequestHandler[];
}

/** A route that matched a request, with its decoded path parameters. */
export interface RouteMatch {
  readonly route: Route;
  readonly params: Record<string, string>;
}

/** A path pattern split at `/`: a literal segment (lower-cased) or a `:name` parameter. */
type Segment = { literal: string } | { param: string };

interface CompiledRoute {
  route: Route;
  segments: Segment[];
}

/**
 * The router's endpoints as one table, matched by hand: one lookup per request where nested Express
 * routers walked a layer per route and per router, each with its own matching, URL rewriting and
 * promise wrapping, on every request. It keeps what Express's router did for these paths: literal
 * segments match case-insensitively, one trailing slash is allowed, a parameter is one non-empty
 * segment, decoded with decodeURIComponent (a malformed escape is a URIError with status 400, as
 * Express throws it), and a GET route answers HEAD too unless the table has a HEAD route of its
 * own.
 */
export class RouteTable {
  private readonly byMethod = new Map<string, CompiledRoute[]>();

  constructor(routes: readonly Route[]) {
    for (const route of routes) {
      const segments = splitPath(route.path).map((part): Segment => (part.startsWith(':') ? { param: part.slice(1) } : { literal: part.toLowerCase() }));
      const list = this.byMethod.get(route.method) ?? [];
      list.push({ route, segments });
      this.byMethod.set(route.method, list);
    }
  }

  /** The route for `method` and `path` (the path below the router's mount, without the query), or undefined. */
  find(method: string, path: string): RouteMatch | undefined {
    const parts = splitPath(path);
    const found = this.findIn(this.byMethod.get(method), parts);
    if (found || method !== 'HEAD') return found;
    return this.findIn(this.byMethod.get('GET'), parts);
  }

  /** The methods some route serves at `path` (for an OPTIONS answer), HEAD included wherever GET is. */
  methodsAt(path: string): string[] {
    const parts = splitPath(path);
    const methods = new Set<string>();
    for (const [method, list] of this.byMethod) {
      if (!this.findIn(list, parts)) continue;
      methods.add(method);
      if (method === 'GET') methods.add('HEAD');
    }
    return [...methods];
  }

  private findIn(list: CompiledRoute[] | undefined, parts: string[]): RouteMatch | undefined {
    if (!list) return undefined;
    for (const { route, segments } of list) {
      if (segments.length !== parts.length) continue;
      let params: Record<string, string> | undefined = {};
      for (let i = 0; i < segments.length; i++) {
        const segment = segments[i]!;
        const part = parts[i]!;
        if ('literal' in segment) {
          if (part.length !== segment.literal.length || part.toLowerCase() !== segment.literal) {
            params = undefined;
            break;
          }
        } else {
          if (part === '') {
            params = undefined;
            break;
          }
          params[segment.param] = decodeParam(part);
        }
      }
      if (params) return { route, params };
    }
    return undefined;
  }
}

/** `/a/b/` → `['a', 'b']`: the leading slash dropped, and one trailing slash (Express's non-strict matching). */
function splitPath(path: string): string[] {
  const end = path.length > 1 && path.endsWith('/') ? path.length - 1 : path.length;
  return path.slice(1, end).split('/');
}

/** A path parameter decoded as Express decodes it: a malformed %-escape is a URIError with status 400 (the error middleware's `invalid_path`). */
function decodeParam(value: string): string {
  if (!value.includes('%')) return value;
  try {
    return decodeURIComponent(value);
  } catch (err) {
    if (err instanceof URIError) Object.assign(err, { status: 400, message: `Failed to decode param '${value}'` });
    throw err;
  }
}

/**
 * Runs a route's handlers in order, each one's `next()` starting the following one; an error (a
 * throw, a rejected promise or `next(err)`) goes to `done(err)` and stops the chain. A handler
 * that answers without calling `next` ends it; the last one calling `next()` is `done(undefined)`
 * (nothing answered).
 */
export function runHandlers(handlers: readonly RequestHandler[], req: Request, res: Response, done: (err: unknown) => void): void {
  const step = (index: number): void => {
    const handler = handlers[index]!;
    let called = false;
    const next: NextFunction = (err?: unknown) => {
      if (called) return;
      called = true;
      if (err !== undefined && err !== null) done(err);
      else if (index + 1 < handlers.length) step(index + 1);
      else done(undefined);
    };
    try {
      const result: unknown = handler(req, res, next);
      if (result instanceof Promise) result.then(undefined, (err: unknown) => next(err ?? new Error('a route handler rejected with no reason')));
    } catch (err) {
      next(err ?? new Error('a route handler threw no reason'));
    }
  };
  step(0);
}
