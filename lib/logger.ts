/** Where recordbase reports what clients must not see (500 causes, init failures). */
export interface Logger {
  error(message: string, ...details: unknown[]): void;
  warn(message: string, ...details: unknown[]): void;
  info(message: string, ...details: unknown[]): void;
}

/** The default logger: the console, each line prefixed so a host can tell whose it is. */
export const consoleLogger: Logger = {
  error: (message, ...details) => console.error(`[recordbase] ${message}`, ...details),
  warn: (message, ...details) => console.warn(`[recordbase] ${message}`, ...details),
  info: (message, ...details) => console.info(`[recordbase] ${message}`, ...details),
};

/** One request the router answered. */
export interface RequestLogEntry {
  /** `GET`, `POST`, ... */
  method: string;
  /** The route's pattern (`/api/collections/:collection/records/:id`); absent when no route matched (an unserved `/api/` path, a 503 before `ready`). */
  route?: string;
  /** The path as the host received it, mount prefix included, without the query string. */
  path: string;
  /** The status sent (for a response cut short, the status it had begun with). */
  status: number;
  /** From the request's arrival to the end of its response (for a realtime stream, its lifetime). */
  durationMs: number;
  /** The collection as the path names it (name or id), on record and file routes. */
  collection?: string;
  /** The id of the identity the request was served as; absent for a guest or when no identity was needed. */
  callerId?: string;
  /** False when the client went away before the response was complete. */
  completed: boolean;
}

/** The host's request log function; what it returns is ignored, and a throw or rejection never reaches the request. */
export type RequestLogFunction = (entry: RequestLogEntry) => void | Promise<void>;
