/**
 * A Node HTTP server for an Express app whose requests and responses are born with the app's
 * own prototypes (`app.request`, `app.response`).
 *
 * Express gives every request its app's methods (`req.get`, `res.json`, ...) by changing the
 * prototype of Node's `req` and `res` objects (`Object.setPrototypeOf`) as the request enters
 * the app. On V8, every property added to an object after its prototype changed gets a hidden
 * class (map) of its own: each request then makes fresh maps for the properties Express, its
 * router and every middleware add, the code that reads them meets a new map every time, and the
 * maps and what they reference outlive the request into V8's old generation. Under load that
 * means frequent mark-compacts, whose cost grows with the process's live heap
 * (docs/configuration.md, "Serving the app: createAppServer"; expressjs/express#5998).
 *
 * Node's server can construct `req` and `res` from classes it is given. When their prototypes
 * are the app's, Express's `setPrototypeOf` finds the prototype already in place and changes
 * nothing, so requests share maps as any other objects do. Nothing else changes: the same
 * Express, the same objects, the same methods. A request that enters a mounted sub-app
 * (`app.use(otherExpressApp)`) still has its prototype changed there; an `express.Router`, such
 * as the records router, is not a sub-app.
 *
 * The per-request maps are those of V8 11.3 and 12.4 (Node 20 and 22). In V8 13.6 (Node 24)
 * properties added after a prototype change share maps, `app.listen`'s requests share them too,
 * and what remains here is a server that costs no more than `app.listen`'s
 * (docs/configuration.md, createAppServer).
 */
import http, { type IncomingMessage, type ServerOptions, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

/** What an Express app (or anything built like one) brings: a request handler and its prototypes. */
export interface PrototypedApp {
  (req: IncomingMessage, res: ServerResponse): void;
  readonly request: object;
  readonly response: object;
}

/** The request and response classes of `createServer` options (`http`, `https`). */
export interface AppServerClasses {
  readonly IncomingMessage: typeof IncomingMessage;
  readonly ServerResponse: typeof ServerResponse;
}

/**
 * Request and response classes whose instances have `app.request` and `app.response` as their
 * prototypes, for any server constructor that takes them:
 * `https.createServer({ ...tls, ...appServerClasses(app) }, app)`.
 */
export function appServerClasses(app: PrototypedApp): AppServerClasses {
  if (isBun) return { IncomingMessage: http.IncomingMessage, ServerResponse: http.ServerResponse };
  // Two ways to give Node's object the app's prototype from birth; which is cheaper is V8's
  // business, so `constructWithNewTarget` picks one by the running V8's version.
  function AppRequest(this: IncomingMessage, socket: Socket): IncomingMessage | void {
    if (constructWithNewTarget) return Reflect.construct(http.IncomingMessage, [socket], AppRequest) as IncomingMessage;
    http.IncomingMessage.call(this, socket);
  }
  AppRequest.prototype = app.request;
  function AppResponse(this: ServerResponse, req: IncomingMessage, options?: unknown): ServerResponse | void {
    if (constructWithNewTarget) return Reflect.construct(http.ServerResponse, [req, options], AppResponse) as ServerResponse;
    (http.ServerResponse as unknown as (this: ServerResponse, ...args: unknown[]) => void).call(this, req, options);
  }
  AppResponse.prototype = app.response;
  return { IncomingMessage: AppRequest as unknown as typeof IncomingMessage, ServerResponse: AppResponse as unknown as typeof ServerResponse };
}

/**
 * Bun: its engine is JavaScriptCore, whose objects do not carry V8's hidden classes (what this
 * module saves), and its `node:http` does not stream a response built from another class (a
 * realtime stream's events never reached the client: spec/runtimes/sdk-smoke.mjs). There the
 * classes are Node's own, and `createAppServer(app)` is `http.createServer(options, app)`.
 */
const isBun = typeof (process.versions as Record<string, string | undefined>).bun === 'string';

/** Whether Node's request and response constructors are plain functions (callable on an object made elsewhere). */
const callableConstructors = [http.IncomingMessage, http.ServerResponse].every((constructor) => !Function.prototype.toString.call(constructor).startsWith('class'));

/**
 * Whether `Reflect.construct(NodeClass, args, AppRequest)` builds the objects, rather than
 * `new AppRequest` with Node's constructor called on it. V8 11 (Node 20) gives each object that
 * Reflect.construct makes with another `new.target` a hidden class of its own, the cost this
 * module avoids, so there the constructor is called on `new AppRequest`'s object. V8 12.4
 * (Node 22) and 13.6 (Node 24) share that class, and there calling the constructor on
 * `new AppRequest`'s object costs more CPU and more scavenges than Reflect.construct
 * (bench/HISTORY.md, "Numbers from the code's comments"). A constructor that is a `class`
 * cannot be called, so it always goes through Reflect.construct.
 */
const constructWithNewTarget = !callableConstructors || Number(process.versions.v8.split('.')[0]) >= 12;

/**
 * `http.createServer(options, app)` with `appServerClasses(app)`: use it where `app.listen`
 * would create the server (`createAppServer(app).listen(port)`).
 */
export function createAppServer(app: PrototypedApp, options: Omit<ServerOptions, 'IncomingMessage' | 'ServerResponse'> = {}): http.Server {
  return http.createServer({ ...options, ...appServerClasses(app) }, app);
}
