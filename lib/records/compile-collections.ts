import { SchemaError } from '../errors.js';
import type { CollectionDefinition, FieldDefinition } from '../schema/definitions.js';
import { buildSchemaRegistry, buildViewCollection, type CollectionSchema, type FieldSchema, type SchemaRegistry } from '../schema/collection-schema.js';
import { completeViewRegistry } from '../schema/view-schema.js';
import { checkCollectionRules, checkFieldRules, type RuleFacts } from './access-rules.js';
import { compileValidator, type RecordValidator } from './validate-record.js';

/** The declared collections, checked and compiled once: the schema, each validator, the rules. */
export interface CompiledCollections {
  readonly registry: SchemaRegistry;
  readonly rules: RuleFacts;
  /** The validator of a collection of this registry. */
  validator(collection: CollectionSchema): RecordValidator;
  /**
   * Whether view collections still wait for their fields (known once the schema sync has asked the
   * database: completeCollections); until then a view has its `id` only.
   */
  readonly viewsPending: boolean;
}

/**
 * Checks and compiles the collection definitions: the one place a router's definitions are
 * checked (names, field options, limits, unknown keys), their validators built and every rule
 * compiled. Synchronous and free of I/O, so createRecordsRouter (and the CLI) can call it at once:
 * any mistake throws a SchemaError naming the collection, field or rule, before a request is served.
 *
 * View collections (docs/collections.md) are the exception the database imposes: their fields
 * come from their query, so with any view declared a rule that does not compile yet (it may read
 * a view's field) is compiled again by completeCollections at `ready`, which then rejects with
 * the same SchemaError. Everything else is still checked here.
 */
export function compileCollections(definitions: readonly CollectionDefinition[]): CompiledCollections {
  const registry = buildSchemaRegistry(definitions);
  const viewsPending = registry.collections.some((c) => c.type === 'view');
  let rules: RuleFacts;
  try {
    rules = checkCollectionRules(registry);
  } catch (err) {
    if (!(viewsPending && err instanceof SchemaError)) throw err;
    rules = { readsBody: () => false };
  }
  return compileRegistry(registry, rules, viewsPending);
}

/**
 * The compiled collections once the schema sync has made the views: each view with the fields its
 * query's columns make (lib/db/schema/sync-views.ts), and every rule compiled against them. Throws the
 * SchemaError of the first rule that does not compile, except a view rule a view's column copied
 * with its field (hideUnfitCopies). Without views, `compiled` itself.
 */
export function completeCollections(compiled: CompiledCollections, views: ReadonlyMap<string, CollectionSchema>): CompiledCollections {
  if (!compiled.viewsPending) return compiled;
  const registry = hideUnfitCopies(completeViewRegistry(compiled.registry, views));
  return compileRegistry(registry, checkCollectionRules(registry), false);
}

/**
 * A view's column that copies a field keeps the field's view rule, read on the view's row
 * (lib/schema/view-schema.ts). Where the rule names what the view lacks (`owner`, not selected),
 * the host wrote no mistake in the view: the copy cannot be guarded there, so it is hidden
 * (superusers only), never shown without its rule. The registry unchanged when every copy fits.
 */
function hideUnfitCopies(registry: SchemaRegistry): SchemaRegistry {
  const replaced = new Map<string, CollectionSchema>();
  for (const view of registry.collections) {
    if (view.type !== 'view') continue;
    const unfit = new Set(view.fields.filter((field) => field.rules !== undefined && !fitsView(registry, view, field)).map((f) => f.name));
    if (unfit.size === 0) continue;
    const fields = view.fields.filter((f) => !f.system).map((f) => {
      if (!unfit.has(f.name)) return f.definition;
      const { rules: _unfit, ...definition } = f.definition;
      return { ...definition, hidden: true };
    });
    const systemDates = view.fields.filter((f) => f.system && f.name !== 'id').map((f) => f.name as 'created' | 'updated');
    replaced.set(view.name, buildViewCollection(view, { fields: fields as FieldDefinition[], systemDates }));
  }
  return replaced.size === 0 ? registry : completeViewRegistry(registry, replaced);
}

function fitsView(registry: SchemaRegistry, view: CollectionSchema, field: FieldSchema): boolean {
  try {
    checkFieldRules({ registry, collection: view, field });
    return true;
  } catch (err) {
    if (err instanceof SchemaError) return false;
    throw err;
  }
}

function compileRegistry(registry: SchemaRegistry, rules: RuleFacts, viewsPending: boolean): CompiledCollections {
  const validators = new Map(registry.collections.map((collection) => [collection, compileValidator(collection)] as const));
  return { registry, rules, viewsPending, validator: (collection) => validators.get(collection)! };
}
