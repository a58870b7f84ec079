import { NotFoundError, UnauthorizedError } from '../errors.js';
import type { RecordValues } from '../db/record-store.js';
import { listFieldFileNames } from '../files/record-files.js';
import { withRequestContext } from '../query/request-info.js';
import type { CollectionSchema, SchemaRegistry } from '../schema/collection-schema.js';
import type { FileFieldSchema } from '../schema/fields/file.js';
import { isReadableId } from '../schema/record-id.js';
import { compileRule, type RuleDecision } from './access-rules.js';
import { compileFieldView, type FieldView } from './field-visibility.js';
import type { SqlFragment } from '../sql-fragment.js';
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
 * fields without a view rule of their own skip rules (and the caller is never resolved, so such a
 * download costs no auth() call). Protected fields need an identity (401) that passes the view
 * rule (404 otherwise, also when the rule is `null`). A file field with a view rule of its own
 * (DESIGN 24) opens only for whom it lets read the field (404 otherwise), public or protected. Both reads may go to the read replica (read-routing.ts): the record's by the
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
  const isProtected = found.field.definition.protected === true;
  const guarded = found.field.rules?.view !== undefined;
  if (!isProtected && !guarded) return found;
  const asked = await options.caller();
  const caller: Caller = { request: withRequestContext(asked.request, 'protectedFile') };
  if (isProtected && !caller.request.auth) throw new UnauthorizedError('This file is protected: it needs an authentication token.', 'file_auth_required');
  if (isSuperuser(caller)) return found;
  const decisions = [...(isProtected ? rulesOf(compileRule({ registry, collection, action: 'view', caller })) : []), ...(guarded ? rulesOf(compileFieldView({ registry, collection, caller }, found.field)) : [])];
  if (decisions.includes('denied')) throw notFound();
  const conditions = decisions as SqlFragment[];
  const allowed = await routing.read(routing.keysOf(caller, context), context, (store) => store.selectById({ collection, id: options.id, where: conditions }));
  if (!allowed) throw notFound();
  return found;
}

/** A rule decision as a list whose `'denied'` stays visible to the caller. */
function rulesOf(decision: RuleDecision | FieldView): (SqlFragment | 'denied')[] {
  return decision === 'denied' ? ['denied'] : Array.isArray(decision) ? decision : [decision];
}
