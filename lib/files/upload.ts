import type { Readable } from 'node:stream';

/**
 * One file part of a create or update, as the record service sees it: already spooled by the
 * HTTP layer, sized, and typed from its bytes. The service never touches multipart or HTTP.
 */
export interface Upload {
  /** The part's name as sent: `docs`, or with a modifier, `docs+` / `+docs`. */
  readonly field: string;
  /** The client's file name; only ever used through `createStoredFileName`. */
  readonly originalName: string;
  readonly size: number;
  /** Sniffed from the first bytes, never the client's claim. */
  readonly mimeType: string;
  /** A fresh stream of the bytes; may be called more than once (until the file was given to storage). */
  open(): Readable;
  /**
   * The local file holding the bytes, when the upload is a spool its owner removes afterwards
   * anyway: storage may take it (`Storage.adopt`) instead of copying the bytes.
   */
  readonly spoolFile?: string;
}
