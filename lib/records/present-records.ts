import type { RecordStore, RecordValues } from '../db/record-store.js';
import { translateDatabaseError } from '../db/statements/translate-database-error.js';
import { applyFields } from '../query/apply-fields.js';
import { parseExpand, type ExpandTree } from '../query/parse-expand.js';
import { parseFields, type FieldSelection } from '../query/parse-fields.js';
import type { CollectionSchema, SchemaRegistry } from '../schema/collection-schema.js';
import { isSuperuser, type Caller } from './caller.js';
import { ExpandBudget, expandRecords, type ExpandLimits, type ExpandScope } from './expand-records.js';
import { readableRecords, readsEveryField } from './field-visibility.js';
import { serializeRecord } from './serialize-record.js';

/** What a response asks of its records: which fields, which relations expanded (parsed by parseResponseShape). */
export interface ResponseShape {
  selection?: FieldSelection;
  tree: ExpandTree;
}

/** The records to present, for whom, and in which shape. */
export interface PresentOptions {
  collection: CollectionSchema;
  records: readonly RecordValues[];
  caller: Caller;
  shape: ResponseShape;
  /** Where expansions read: the operation's store (RecordService.storeOf): inside a transaction, its own, to see what it wrote; else the pool, bounded by the operation's context. */
  store: RecordStore;
  /**
   * What the expansion draws on when several responses make one answer (a batch's): one budget
   * from `createExpandBudget`, passed to each. Absent: this response has the limits to itself.
   */
  budget?: ExpandBudget;
}

/**
 * Parses the `fields` and `expand` parameters of a request. Call it before any write: a bad
 * `fields` is a 400 that must come before the record is stored, or a client that retries would
 * create a duplicate.
 */
export function parseResponseShape(params: { fields?: string; expand?: string }): ResponseShape {
  return { selection: parseFields(params.fields), tree: parseExpand(params.expand) };
}

/**
 * Turns stored records into response objects: hidden fields dropped (but for superusers), and
 * each field whose view rule refuses the caller on that record (lib/records/field-visibility.ts),
 * relations expanded (`expand`), then the `fields` selection applied. Shared by list, view,
 * create and update so every response has one shape.
 */
export class RecordPresenter {
  constructor(
    private readonly registry: SchemaRegistry,
    private readonly options: { expandLimits: ExpandLimits },
  ) {}

  /** The limits one response's expansion has, and a batch's whole answer. */
  get expandLimits(): ExpandLimits {
    return this.options.expandLimits;
  }

  /** One expand budget of this presenter's limits, for responses that are bounded together (a batch's). */
  createExpandBudget(scope: ExpandScope): ExpandBudget {
    return new ExpandBudget(this.expandLimits, scope);
  }

  async present(options: PresentOptions): Promise<Record<string, unknown>[]> {
    const { selection, tree } = options.shape;
    const showHidden = isSuperuser(options.caller);
    const records = readsEveryField(options.collection, options.caller) ? options.records : await this.readable(options);
    const items = records.map((values) => ({ values, out: serializeRecord(options.collection, values, { showHidden }) }));
    // Nothing to expand (most responses): no expansion call and no await.
    if (tree.size === 0) return items.map((item) => applyFields(item.out, selection));
    try {
      await expandRecords({
        registry: this.registry,
        store: options.store,
        caller: options.caller,
        collection: options.collection,
        items,
        tree,
        limits: this.expandLimits,
        budget: options.budget,
      });
    } catch (err) {
      throw translateDatabaseError(err);
    }
    return items.map((item) => applyFields(item.out, selection));
  }

  /** The records without what the caller may not read of each (at most one statement, for records no select of this caller checked). */
  private async readable(options: PresentOptions): Promise<readonly RecordValues[]> {
    try {
      return await readableRecords({ registry: this.registry, store: options.store, collection: options.collection, caller: options.caller, records: options.records });
    } catch (err) {
      throw translateDatabaseError(err);
    }
  }
}
