import { SchemaError } from '../errors.js';
import type { CollectionDefinition } from '../schema/definitions.js';
import { buildSchemaRegistry, type CollectionSchema, type SchemaRegistry } from '../schema/collection-schema.js';
import { completeViewRegistry } from '../schema/view-schema.js';
import { checkCollectionRules, type RuleFacts } from './access-rules.js';
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
 * SchemaError of the first rule that does not compile. Without views, `compiled` itself.
 */
export function completeCollections(compiled: CompiledCollections, views: ReadonlyMap<string, CollectionSchema>): CompiledCollections {
  if (!compiled.viewsPending) return compiled;
  const registry = completeViewRegistry(compiled.registry, views);
  return compileRegistry(registry, checkCollectionRules(registry), false);
}

function compileRegistry(registry: SchemaRegistry, rules: RuleFacts, viewsPending: boolean): CompiledCollections {
  const validators = new Map(registry.collections.map((collection) => [collection, compileValidator(collection)] as const));
  return { registry, rules, viewsPending, validator: (collection) => validators.get(collection)! };
}
