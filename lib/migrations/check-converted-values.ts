/**
 * The check that follows `m.changeFieldType` (docs/collections.md, "Changing your schema"): a
 * conversion keeps what the column can hold, and a field's type accepts less than its column (a
 * url only http(s), an email an address, a select its values, a relation record ids), so every
 * converted value is checked the way a write to the field is, and none the type would refuse
 * is served afterwards.
 */
import { clearColumnValues, readColumnPage } from '../db/schema/reshape-collections.js';
import type { StatementRunner } from '../db/statements/statement-runner.js';
import { ValidationError } from '../errors.js';
import { compileValidator } from '../records/validate-record.js';
import type { CollectionSchema, DeclaredFieldSchema } from '../schema/collection-schema.js';
import { isEmptyValue } from '../schema/storage-kinds.js';

/** Values read and checked at once: a page's ids are what a clear updates. */
const PAGE_SIZE = 500;

/** What the check found: the records whose value the type refuses, the first of them (in id order) with the reason, and how many it cleared. */
export interface RefusedValues {
  count: number;
  example?: { id: string; message: string };
  cleared: number;
}

/**
 * Checks every non-empty value of `field` (as declared now) in its table, page by page in id
 * order, with the field's own validation: its coercion, constraints and value checks, as on an
 * update that sends the value. An empty value is the type's own and passes (`required` is the
 * declaration's, which the next write checks, as for a field added to existing records).
 * `storedNames`: the values were already this field's stored file names (a file field before),
 * so a file field keeps them as an update keeps current files; otherwise a file field refuses
 * every name, which no upload made. With `clear`, each refused value becomes the empty value.
 */
export async function checkConvertedValues(
  trx: StatementRunner,
  options: { collection: CollectionSchema; field: DeclaredFieldSchema; storedNames: boolean; clear: boolean },
): Promise<RefusedValues> {
  const { collection, field } = options;
  // A validator of this field alone: other fields' stored values are not this conversion's business.
  const validator = compileValidator({ ...collection, fields: [field] });
  const found: RefusedValues = { count: 0, cleared: 0 };
  for (let after = ''; ; ) {
    const page = await readColumnPage(trx, { table: collection.table, column: field.column, kind: field.storage, after, limit: PAGE_SIZE });
    if (page.length === 0) return found;
    after = page[page.length - 1]!.id;
    const refused: string[] = [];
    for (const { id, value } of page) {
      if (isEmptyValue(field, value)) continue;
      const message = findRefusal(validator, { field, value, storedNames: options.storedNames });
      if (message === undefined) continue;
      found.count++;
      found.example ??= { id, message };
      refused.push(id);
    }
    if (options.clear && refused.length > 0) {
      await clearColumnValues(trx, { table: collection.table, column: field.column, kind: field.storage, ids: refused });
      found.cleared += refused.length;
    }
  }
}

/** The field's error for `value`, or undefined when the field accepts it. */
function findRefusal(validator: ReturnType<typeof compileValidator>, options: { field: DeclaredFieldSchema; value: unknown; storedNames: boolean }): string | undefined {
  const { field, value } = options;
  try {
    validator.validate({ data: { [field.name]: value }, existing: options.storedNames ? { [field.name]: value } : {} });
    return undefined;
  } catch (error) {
    if (!(error instanceof ValidationError)) throw error;
    return error.data[field.name]?.message ?? error.message;
  }
}
