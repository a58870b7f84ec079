import { NotFoundError, UnauthorizedError } from '../errors.js';
import type { RecordValues } from '../db/record-store.js';
import { listFieldFileNames } from '../files/record-files.js';
import { withRequestContext } from '../query/request-info.js';
import type { CollectionSchema, SchemaRegistry } from '../schema/collection-schema.js';
import type { FileFieldSchema } from '../schema/fields/file.js';
import { isReadableId } from '../schema/record-id.js';
import { compileRule } from './access-rules.js';
import { isSuperuser, type Caller } from './caller.js';
import type { ReadRouting } from './read-routing.js';
import type { WriteUnit } from './write-unit.js';
import type { DatabaseContext } from '../db/statements/database-context.js';

/** The record a download names, and the file field that holds the name. */
export interface FileOwner {
  record: RecordValues;
  field: FileFieldSchema;
}

/**
 * The record and file field behind a download of `name` (docs/protected-files.md), for
 * RecordService.findFileOwner: 404 unless the name is in one of the record's file fields. Public
 * fields skip rules (and the caller is never resolved, so a public download costs no auth() call).
 * Protected fields need an identity (401) that passes the view rule (404 otherwise, also when the
 * rule is `null`). Both reads may go to the read replica (read-routing.ts): the record's by the
 * request's address (the caller is not known yet), the rule's by the caller's keys.
 */
export async function findFileOwner(
  where: { registry: SchemaRegistry; routing: ReadRouting; collection: CollectionSchema; context: { unit?: WriteUnit; database?: DatabaseContext } },
  options: { id: string; name: string; caller: () => Promise<Caller> },
): Promise<FileOwner> {
  const { registry, routing, collection, context } = where;
  const notFound = () => new NotFoundError("The requested file wasn't found.", 'file_not_found');
  if (!isReadableId(collection, options.id)) throw notFound();
  const found = await routing.read(routing.keysOf(undefined, context), context, async (store) => {
    const record = await store.selectById({ collection, id: options.id });
    const field = record && collection.fields.find((f): f is FileFieldSchema => f.type === 'file' && listFieldFileNames(record[f.name]).includes(options.name));
    return record && field ? { record, field } : undefined;
  });
  if (!found) throw notFound();
  if (found.field.definition.protected !== true) return found;
  const asked = await options.caller();
  const caller: Caller = { request: withRequestContext(asked.request, 'protectedFile') };
  if (!caller.request.auth) throw new UnauthorizedError('This file is protected: it needs an authentication token.', 'file_auth_required');
  if (isSuperuser(caller)) return found;
  const rule = compileRule({ registry, collection, action: 'view', caller });
  if (rule === 'denied') throw notFound();
  const allowed = await routing.read(routing.keysOf(caller, context), context, (store) => store.selectById({ collection, id: options.id, where: rule }));
  if (!allowed) throw notFound();
  return found;
}
