import type { CollectionSchema, FieldSchema, SchemaRegistry } from '../schema/collection-schema.js';

/**
 * What one relation name on a collection means: a relation field of it (`author`), or a
 * back-relation `x_via_y` (collection `x` whose relation field `y` points here). Filter paths,
 * sort paths and expand all need this same answer.
 */
export type ResolvedRelation =
  | { readonly kind: 'field'; readonly field: FieldSchema; readonly target: CollectionSchema }
  | { readonly kind: 'back'; readonly collection: CollectionSchema; readonly field: FieldSchema };

/** Options of resolveRelation. */
export interface ResolveRelationOptions {
  readonly registry: SchemaRegistry;
  readonly collection: CollectionSchema;
  readonly name: string;
  /** Superusers and rules may traverse hidden relation fields; everyone else sees them as unknown. */
  readonly canSeeHidden?: boolean;
}

/**
 * Resolves one relation name, or undefined when it names nothing traversable (unknown, not a
 * relation, or hidden from this caller), so callers can treat all three alike.
 */
export function resolveRelation(options: ResolveRelationOptions): ResolvedRelation | undefined {
  const { registry, collection, name, canSeeHidden = false } = options;
  const field = collection.field(name);
  if (field) {
    if (field.relationTo === undefined || (field.hidden && !canSeeHidden)) return undefined;
    const target = registry.get(field.relationTo);
    return target ? { kind: 'field', field, target } : undefined;
  }
  if (!name.includes('_via_')) return undefined;
  for (const back of registry.backRelations(collection)) {
    if (`${back.collection.name}_via_${back.field.name}` !== name) continue;
    if (back.field.hidden && !canSeeHidden) return undefined;
    return { kind: 'back', collection: back.collection, field: back.field };
  }
  return undefined;
}
