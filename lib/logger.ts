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
