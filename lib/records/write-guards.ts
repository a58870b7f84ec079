import { BadRequestError, NotFoundError } from '../errors.js';
import type { CollectionSchema } from '../schema/collection-schema.js';
import { isSafeRecordId } from '../schema/record-id.js';

/**
 * A view collection's records are the rows of its query (docs/collections.md): a create, update or
 * delete of one is a 400 before anything is read, written or uploaded, over HTTP, in a batch and
 * through the server API alike.
 */
export function refuseViewWrite(collection: CollectionSchema): void {
  if (collection.type === 'view') throw new BadRequestError(`"${collection.name}" is a view collection: its records are read-only.`, 'view_collection_read_only');
}

/** Every stored id is safe (lib/schema/record-id.ts), so anything else is a 404 without asking the database. */
export function requireRecordId(id: string): void {
  if (!isSafeRecordId(id)) throw new NotFoundError("The requested record wasn't found.", 'record_not_found');
}
