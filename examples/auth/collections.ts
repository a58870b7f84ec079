import type { CollectionDefinition } from '../../lib/index.js';

/**
 * The auth example's collections: users, whose password hash is a hidden field (never in a
 * response, nor filterable, but for a superuser), and notes that only their owner sees.
 */
export const authCollections: CollectionDefinition[] = [
  {
    name: 'users',
    fields: [
      { name: 'email', type: 'email', required: true },
      { name: 'name', type: 'text', max: 100 },
      { name: 'passwordHash', type: 'text', required: true, hidden: true },
    ],
    // Written only by the example's /signup (as a superuser); each user reads their own record.
    rules: { list: 'id = @request.auth.id', view: 'id = @request.auth.id', create: null, update: null, delete: null },
    indexes: [{ fields: ['email'], unique: true }],
  },
  {
    name: 'notes',
    fields: [
      { name: 'text', type: 'text', required: true, max: 2000 },
      { name: 'owner', type: 'relation', collection: 'users', required: true },
    ],
    rules: {
      list: 'owner = @request.auth.id',
      view: 'owner = @request.auth.id',
      create: '@request.auth.id != "" && owner = @request.auth.id',
      update: 'owner = @request.auth.id && @request.body.owner:changed = false',
      delete: 'owner = @request.auth.id',
    },
  },
];
