import type { CollectionDefinition } from '../schema/definitions.js';
import { buildSchemaRegistry, type CollectionSchema, type SchemaRegistry } from '../schema/collection-schema.js';
import { checkCollectionRules, type RuleFacts } from './access-rules.js';
import { compileValidator, type RecordValidator } from './validate-record.js';

/** The declared collections, checked and compiled once: the schema, each validator, the rules. */
export interface CompiledCollections {
  readonly registry: SchemaRegistry;
  readonly rules: RuleFacts;
  /** The validator of a collection of this registry. */
  validator(collection: CollectionSchema): RecordValidator;
}

/**
 * Checks and compiles the collection definitions: the one place a router's definitions are
 * checked (names, field options, limits, unknown keys), their validators built and every rule
 * compiled. Synchronous and free of I/O, so createRecordsRouter (and the CLI) can call it at once:
 * any mistake throws a SchemaError naming the collection, field or rule, before a request is served.
 */
export function compileCollections(definitions: readonly CollectionDefinition[]): CompiledCollections {
  const registry = buildSchemaRegistry(definitions);
  const validators = new Map(registry.collections.map((collection) => [collection, compileValidator(collection)] as const));
  const rules = checkCollectionRules(registry);
  return { registry, rules, validator: (collection) => validators.get(collection)! };
}
