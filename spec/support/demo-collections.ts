import type { CollectionDefinition } from '../../lib/index.js';
import { OPEN_RULES } from './open-rules.js';

/**
 * The collections most integration suites use: users, posts (every field type) and two kinds of
 * comments (one cascading, one with a required relation that blocks deletes).
 */
export function blogCollections(): CollectionDefinition[] {
  return [
    {
      name: 'users',
      fields: [
        { name: 'name', type: 'text', required: true },
        { name: 'email', type: 'email' },
        { name: 'role', type: 'select', values: ['editor', 'reader'] },
      ],
      rules: OPEN_RULES,
      indexes: [{ fields: ['email'], unique: true }],
    },
    {
      name: 'posts',
      id: 'pbc_posts01',
      fields: [
        { name: 'title', type: 'text', required: true, min: 1, max: 20 },
        { name: 'body', type: 'text' },
        { name: 'slug', type: 'text', pattern: '^[a-z0-9-]*$' },
        { name: 'views', type: 'number', min: 0, onlyInt: true },
        { name: 'score', type: 'number', max: 10 },
        { name: 'published', type: 'bool' },
        { name: 'publishedAt', type: 'date' },
        { name: 'contact', type: 'email' },
        { name: 'site', type: 'url' },
        { name: 'category', type: 'select', values: ['news', 'howto'] },
        { name: 'tags', type: 'select', values: ['a', 'b', 'c'], maxSelect: 2 },
        { name: 'meta', type: 'json' },
        { name: 'author', type: 'relation', collection: 'users' },
        { name: 'editors', type: 'relation', collection: 'users', maxSelect: 5 },
        { name: 'cover', type: 'file' },
        { name: 'secret', type: 'text', hidden: true },
      ],
      rules: OPEN_RULES,
      indexes: [{ fields: ['slug'], unique: true }, { fields: ['views'] }],
    },
    {
      name: 'comments',
      fields: [
        { name: 'text', type: 'text' },
        { name: 'post', type: 'relation', collection: 'posts', cascadeDelete: true },
      ],
      rules: OPEN_RULES,
    },
    {
      name: 'pins',
      fields: [{ name: 'post', type: 'relation', collection: 'posts', required: true }],
      rules: OPEN_RULES,
    },
    {
      name: 'locked',
      fields: [{ name: 'note', type: 'text' }],
    },
  ];
}

/** Names that break naive generators: prototype keys, underscores that a careless PascalCase merges. */
export function trickyCollections(): CollectionDefinition[] {
  return [
    {
      name: 'a_b',
      fields: [
        { name: '__proto__', type: 'text', required: true },
        { name: 'constructor', type: 'number' },
        { name: 'self', type: 'relation', collection: 'a_b', maxSelect: 3 },
        { name: 'shots', type: 'file', maxSelect: 4, mimeTypes: ['image/png', 'image/webp'], thumbs: ['100x100'], maxSize: 1000 },
        { name: 'secret_doc', type: 'file', protected: true },
        { name: 'when', type: 'date', required: true },
        { name: 'agree', type: 'bool', required: true },
        { name: 'odd', type: 'select', values: ['*/', "it's", ''] },
      ],
    },
    { name: 'a__b', fields: [{ name: 'ref', type: 'relation', collection: 'a_b', required: true }] },
    { name: 'ab', fields: [] },
    { name: '_ab', fields: [{ name: 'x', type: 'text', hidden: true }] },
  ];
}
