import { buildSchemaRegistry } from '../../../lib/schema/collection-schema.js';

/**
 * A schema whose collections have view rules, for the target-rule tables: users see only
 * themselves; posts are open; comments and vaults are superusers only (null); a bookmark is
 * visible to its user or to that user's best friend (a rule that itself goes through a relation).
 */
export const guardedRegistry = buildSchemaRegistry([
  {
    name: 'users',
    rules: { view: 'id = @request.auth.id' },
    fields: [
      { name: 'name', type: 'text' },
      { name: 'email', type: 'email' },
      { name: 'age', type: 'number' },
      { name: 'best', type: 'relation', collection: 'users' },
      { name: 'friends', type: 'relation', collection: 'users', maxSelect: 5 },
    ],
  },
  {
    name: 'vaults',
    rules: { view: null },
    fields: [{ name: 'code', type: 'text' }],
  },
  {
    name: 'posts',
    rules: { view: '' },
    fields: [
      { name: 'title', type: 'text' },
      { name: 'author', type: 'relation', collection: 'users' },
      { name: 'editors', type: 'relation', collection: 'users', maxSelect: 5 },
      { name: 'vault', type: 'relation', collection: 'vaults' },
    ],
  },
  {
    name: 'comments',
    rules: { view: null },
    fields: [
      { name: 'text', type: 'text' },
      { name: 'post', type: 'relation', collection: 'posts' },
    ],
  },
  {
    name: 'bookmarks',
    rules: { view: "user = @request.auth.id || user.best = @request.auth.id" },
    fields: [
      { name: 'user', type: 'relation', collection: 'users' },
      { name: 'posts', type: 'relation', collection: 'posts', maxSelect: 10 },
    ],
  },
]);
