import type { CollectionDefinition } from '../../lib/index.js';

/**
 * The demo's collections: users, posts written by a user, comments on a post. Anyone may read;
 * signed-in callers may write (as the author: the demo's hooks set it); authors may edit their
 * own posts; users' e-mails are hidden from everyone but superusers.
 */
export const demoCollections: CollectionDefinition[] = [
  {
    name: 'users',
    fields: [
      { name: 'name', type: 'text', required: true, max: 100 },
      // Hidden: only superusers see it; a guest listing users must not harvest addresses.
      { name: 'email', type: 'email', hidden: true },
    ],
    rules: { list: '', view: '', create: null, update: null, delete: null },
    indexes: [{ fields: ['email'], unique: true }],
  },
  {
    name: 'posts',
    fields: [
      { name: 'title', type: 'text', required: true, min: 1, max: 200 },
      { name: 'body', type: 'text' },
      { name: 'published', type: 'bool' },
      { name: 'tags', type: 'select', values: ['news', 'howto', 'release'], maxSelect: 3 },
      { name: 'author', type: 'relation', collection: 'users' },
    ],
    rules: { list: '', view: '', create: '@request.auth.id != ""', update: 'author = @request.auth.id', delete: 'author = @request.auth.id' },
  },
  {
    name: 'comments',
    fields: [
      { name: 'text', type: 'text', required: true, max: 2000 },
      { name: 'post', type: 'relation', collection: 'posts', required: true, cascadeDelete: true },
      { name: 'author', type: 'relation', collection: 'users' },
    ],
    rules: { list: '', view: '', create: '@request.auth.id != ""', update: null, delete: null },
  },
];
