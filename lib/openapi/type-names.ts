/**
 * Names the generated OpenAPI schemas and TypeScript declarations give a collection. Both
 * outputs share them, so `PostsRecord` means the same thing in the document and in the types.
 */

/** What each name adds to the collection's base name. No suffix ends another, so names never collide. */
export const TYPE_SUFFIXES = {
  record: 'Record',
  expand: 'Expand',
  list: 'List',
  create: 'Create',
  update: 'Update',
  createForm: 'CreateForm',
  updateForm: 'UpdateForm',
  aggregate: 'Aggregate',
  aggregateGroup: 'AggregateGroup',
} as const;

/** One kind of generated name (a key of TYPE_SUFFIXES). */
export type TypeNameKind = keyof typeof TYPE_SUFFIXES;

/**
 * The PascalCase base name of a collection: `blog_posts` -> `BlogPosts`. Injective on collection
 * names (`[a-z_][a-z0-9_]*`), so two collections never share a type name: an underscore is
 * dropped only when a letter follows it and it is not leading (that letter becomes upper case),
 * so `a__b` -> `A_B`, `_x` -> `_X`, `a_1` -> `A_1`, and upper case letters map back to `_` + letter.
 */
export function toBaseTypeName(collectionName: string): string {
  const leading = /^_*/.exec(collectionName)![0];
  const rest = collectionName.slice(leading.length);
  const camel = rest.replace(/_([a-z])/g, (_match, letter: string) => letter.toUpperCase());
  return leading + camel.charAt(0).toUpperCase() + camel.slice(1);
}

/** The name of one generated schema or type of a collection: `posts`, `record` -> `PostsRecord`. */
export function toTypeName(collectionName: string, kind: TypeNameKind): string {
  return toBaseTypeName(collectionName) + TYPE_SUFFIXES[kind];
}
