import type { Logger } from '../logger.js';
import type { RecordValues } from '../db/record-store.js';
import type { CollectionSchema } from '../schema/collection-schema.js';
import { buildFileKey, buildRecordPrefix, buildThumbnailPrefix } from './file-names.js';
import type { StagedUpload } from './stage-uploads.js';
import type { Storage } from './storage.js';

/** The file names one file field's value holds: a name, a list of names, or nothing. */
export function listFieldFileNames(value: unknown): string[] {
  return (Array.isArray(value) ? value : [value]).filter((name): name is string => typeof name === 'string' && name !== '');
}

/** Every file name a record's file fields hold. */
export function listFileNames(collection: CollectionSchema, values: RecordValues | undefined): string[] {
  if (!values) return [];
  return collection.fields.filter((field) => field.type === 'file').flatMap((field) => listFieldFileNames(values[field.name]));
}

/**
 * The storage side of a record write (docs/files.md): new files are written before the
 * transaction commits and removed if it fails; replaced and deleted files go after it commits.
 * Removal after commit never fails the request (the record is already right): a failure is
 * logged, and the cleanup sweep removes the leftover later.
 */
export class RecordFiles {
  constructor(
    private readonly storage: Storage,
    private readonly logger: Logger,
  ) {}

  /**
   * Writes the staged uploads of one record and resolves with their keys. All or nothing: if one
   * write fails, the ones already written are removed and the error propagates (a 500).
   */
  async write(collection: CollectionSchema, recordId: string, staged: readonly StagedUpload[]): Promise<string[]> {
    const written: string[] = [];
    try {
      // One at a time: each source is a spooled file, and sequential writes keep memory and open files flat.
      for (const item of staged) {
        const key = buildFileKey({ collectionId: collection.id, recordId, name: item.name });
        const options = { contentType: item.upload.mimeType, size: item.upload.size };
        // A spooled upload is moved into place when the storage can (one write of the bytes, not two).
        const moved = item.upload.spoolFile !== undefined && this.storage.adopt ? await this.storage.adopt(key, item.upload.spoolFile, options) : undefined;
        if (!moved) await this.storage.write(key, item.upload.open(), options);
        written.push(key);
      }
      return written;
    } catch (err) {
      await this.discard(written);
      throw err;
    }
  }

  /** Removes files written for a write that did not commit. */
  async discard(keys: readonly string[]): Promise<void> {
    await forEachLimited(keys, (key) => this.storage.delete(key).catch((err: unknown) => this.logger.warn(`could not remove an uncommitted file; the sweep will`, err)));
  }

  /** Reports files left in place because their write's commit had an unknown outcome. */
  keepUnknown(keys: readonly string[]): void {
    this.logger.warn(`the commit of a write failed with an unknown outcome; keeping its ${keys.length} new file(s) for the sweep to decide`);
  }

  /** After a committed update: removes the files the record no longer holds, with their thumbnails. */
  async removeNames(collection: CollectionSchema, recordId: string, names: readonly string[]): Promise<void> {
    await forEachLimited(names, async (name) => {
      const parts = { collectionId: collection.id, recordId, name };
      try {
        await this.storage.delete(buildFileKey(parts));
        await this.storage.deletePrefix(buildThumbnailPrefix(parts));
      } catch (err) {
        this.logger.warn(`could not remove a replaced file of collection "${collection.name}"; the sweep will`, err);
      }
    });
  }

  /** After a committed delete: removes the folder (files and thumbnails) of each record that had files. */
  async removeRecords(records: readonly { collection: CollectionSchema; record: RecordValues }[]): Promise<void> {
    await forEachLimited(records, async ({ collection, record }) => {
      // A record without files has no folder (thumbnails only exist beside files): skip the call.
      if (listFileNames(collection, record).length === 0) return;
      const prefix = buildRecordPrefix({ collectionId: collection.id, recordId: String(record.id) });
      try {
        await this.storage.deletePrefix(prefix);
      } catch (err) {
        this.logger.warn(`could not remove the files of deleted record ${prefix}; the sweep will`, err);
      }
    });
  }
}

/** Storage calls in flight at once while removing files: a bulk delete of 100,000 records must not open 100,000 at a time. */
const REMOVAL_CONCURRENCY = 16;

/** Runs `work` for every item, at most REMOVAL_CONCURRENCY at a time. */
async function forEachLimited<T>(items: readonly T[], work: (item: T) => Promise<unknown>): Promise<void> {
  let next = 0;
  const lane = async () => {
    while (next < items.length) await work(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(REMOVAL_CONCURRENCY, items.length) }, lane));
}
