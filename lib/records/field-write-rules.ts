/**
 * A field's `create` and `update` rules (DESIGN 24, docs/collections.md "Field rules") as a write
 * checks them. A write "sends" a field when its normalised write touches it: the plain key or any
 * modifier (`f+`, `+f`, `f-`), a multipart value or file part (`f-` deleting a file included),
 * `@jsonPayload`, a batch item's body, a server-API call's data. Sending the stored value unchanged
 * is still sending. The fields a replace-mode multipart update clears are not sent: it leaves the
 * guarded ones alone for non-superusers (field-operations.ts).
 */
import { ForbiddenError } from '../errors.js';
import { RECORD_ALIAS, type RecordStore, type RecordValues } from '../db/record-store.js';
import { compileFilter } from '../query/compile-filter.js';
import type { RequestInfo } from '../query/request-info.js';
import { rawSql, type SqlFragment } from '../sql-fragment.js';
import type { CollectionSchema, DeclaredFieldSchema, SchemaRegistry } from '../schema/collection-schema.js';
import { isSuperuser, type Caller } from './caller.js';
import type { NormalizedWrite } from './normalize-write.js';

/** One sent field whose rule restricts the caller: its condition on the record, or `null` (superusers only). */
export interface FieldWriteCheck {
  readonly field: DeclaredFieldSchema;
  readonly condition: SqlFragment | null;
}

/**
 * The checks a write must pass for the fields it sends, in declaration order: none for superusers
 * and for fields without a rule for `action`. Each rule is compiled as the collection's rule for
 * the same write is (rule mode, the same `@request`, the normalised body). The list ends at the
 * first superusers-only field: whatever comes after it, the write is refused by then.
 */
export function compileFieldWriteChecks(options: {
  registry: SchemaRegistry;
  collection: CollectionSchema;
  action: 'create' | 'update';
  caller: Caller;
  write: NormalizedWrite;
}): FieldWriteCheck[] {
  const { caller, write, action } = options;
  if (isSuperuser(caller)) return [];
  const checks: FieldWriteCheck[] = [];
  let request: RequestInfo | undefined;
  const now = new Date();
  for (const { field } of write.operations.fields) {
    const rule = field.rules?.[action];
    if (rule === undefined || !Object.prototype.hasOwnProperty.call(write.data, field.name)) continue;
    if (rule === null) {
      checks.push({ field, condition: null });
      break;
    }
    request ??= { ...caller.request, body: write.data };
    const compiled = compileFilter(rule, { registry: options.registry, collection: options.collection, alias: RECORD_ALIAS, request, mode: 'rule', now, creating: action === 'create' });
    checks.push({ field, condition: compiled });
  }
  return checks;
}

/** The 403 of a superusers-only field when it comes first: refused whatever the record holds, with no statement. */
export function refuseSuperusersOnly(checks: readonly FieldWriteCheck[]): void {
  if (checks[0]?.condition === null) throw refusedField(checks[0].field);
}

/**
 * A create's rule and the rules of the fields it sends, in one statement on the row the insert
 * would write (RecordStore.checkNewRow): the create rule's 403 first, then the first refused field's.
 */
export async function checkNewRecord(store: RecordStore, options: { collection: CollectionSchema; values: RecordValues; rule: readonly SqlFragment[]; fields: readonly FieldWriteCheck[] }): Promise<void> {
  const checks = [options.rule, ...conditionsOf(options.fields)];
  const [allowed, ...passed] = await store.checkNewRow({ collection: options.collection, values: options.values, checks });
  if (!allowed) throw new ForbiddenError('You are not allowed to create this record.');
  refuseFailed(options.fields, passed);
}

/** An update's field checks on the stored row (RecordStore.checkRow), under its lock; nothing to run without checks. */
export async function checkStoredRecord(store: RecordStore, options: { collection: CollectionSchema; id: string; fields: readonly FieldWriteCheck[] }): Promise<void> {
  if (options.fields.length === 0) return;
  refuseFailed(options.fields, (await store.checkRow({ collection: options.collection, id: options.id, checks: conditionsOf(options.fields) })) ?? []);
}

/** The checks as conditions of one statement, each a conjunction of one: a superusers-only field is FALSE there. */
export function conditionsOf(checks: readonly FieldWriteCheck[]): SqlFragment[][] {
  return checks.map((check) => [check.condition ?? rawSql('FALSE')]);
}

/**
 * Throws the 403 of the first check that failed (`passed[i]`: whether checks[i] held), naming its
 * field: the caller knows what it sent, so the name tells it nothing it did not know.
 */
function refuseFailed(checks: readonly FieldWriteCheck[], passed: readonly boolean[]): void {
  const failed = checks.findIndex((_check, i) => passed[i] !== true);
  if (failed >= 0) throw refusedField(checks[failed]!.field);
}

/** The 403 of a write that sends a field whose rule refuses the caller. */
function refusedField(field: DeclaredFieldSchema): ForbiddenError {
  return new ForbiddenError(`You may not set the field "${field.name}".`);
}
