import type { RecordStore, RecordValues } from '../db/record-store.js';
import { translateDatabaseError } from '../db/translate-database-error.js';
import { applyFields } from '../query/apply-fields.js';
import { parseExpand } from '../query/parse-expand.js';
import { parseFields } from '../query/parse-fields.js';
import type { CollectionSchema, SchemaRegistry } from '../schema/collection-schema.js';
import { isSuperuser, type Caller } from './caller.js';
import { expandRecords } from './expand-records.js';
import { serializeRecord } from './serialize-record.js';

/** What a response asks of its records: which fields, which relations expanded. */
export interface PresentOptions {
  collection: CollectionSchema;
  records: readonly RecordValues[];
  caller: Caller;
  fields?: string;
  expand?: string;
}

/**
 * Turns stored records into response objects: hidden fields dropped (but for superusers),
 * relations expanded (`expand`), then the `fields` selection applied. Shared by list, view,
 * create and update so every response has one shape.
 */
export class RecordPresenter {
  constructor(
    private readonly registry: SchemaRegistry,
    private readonly store: RecordStore,
  ) {}

  async present(options: PresentOptions): Promise<Record<string, unknown>[]> {
    const selection = parseFields(options.fields);
    const showHidden = isSuperuser(options.caller);
    const items = options.records.map((values) => ({ values, out: serializeRecord(options.collection, values, { showHidden }) }));
    try {
      await expandRecords({
        registry: this.registry,
        store: this.store,
        caller: options.caller,
        collection: options.collection,
        items,
        tree: parseExpand(options.expand),
      });
    } catch (err) {
      throw translateDatabaseError(err);
    }
    return items.map((item) => applyFields(item.out, selection));
  }
}
