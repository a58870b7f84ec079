import { BadRequestError } from '../../../lib/errors.js';
import { buildSchemaRegistry } from '../../../lib/schema/collection-schema.js';
import type { RequestInfo } from '../../../lib/query/request-info.js';
import type { FilterContext } from '../../../lib/query/compile-filter.js';

/** Every record viewable: relation hops of these tables are not restricted by view rules. */
const OPEN_VIEW = { view: '' };

/**
 * The small schema every query unit test compiles against: users, posts (single and multi
 * relations, multi select, hidden field, date, json), comments (back-relation `comments_via_post`)
 * and bookmarks (a multi relation to posts, for `bookmarks_via_posts`).
 */
export const registry = buildSchemaRegistry([
  {
    name: 'users',
    rules: OPEN_VIEW,
    fields: [
      { name: 'name', type: 'text' },
      { name: 'email', type: 'email' },
      { name: 'age', type: 'number' },
      { name: 'verified', type: 'bool' },
      { name: 'friends', type: 'relation', collection: 'users', maxSelect: 5 },
      { name: 'best', type: 'relation', collection: 'users' },
      { name: 'token', type: 'text', hidden: true },
    ],
  },
  {
    name: 'posts',
    rules: OPEN_VIEW,
    fields: [
      { name: 'title', type: 'text' },
      { name: 'body', type: 'text' },
      { name: 'views', type: 'number' },
      { name: 'published', type: 'bool' },
      { name: 'publishedAt', type: 'date' },
      { name: 'tags', type: 'select', values: ['a', 'b', 'c', 'a_b'], maxSelect: 3 },
      { name: 'meta', type: 'json' },
      { name: 'author', type: 'relation', collection: 'users' },
      { name: 'editors', type: 'relation', collection: 'users', maxSelect: 5 },
      { name: 'secret', type: 'text', hidden: true },
    ],
  },
  {
    name: 'comments',
    rules: OPEN_VIEW,
    fields: [
      { name: 'text', type: 'text' },
      { name: 'likes', type: 'number' },
      { name: 'post', type: 'relation', collection: 'posts' },
      { name: 'author', type: 'relation', collection: 'users' },
    ],
  },
  {
    name: 'bookmarks',
    rules: OPEN_VIEW,
    fields: [
      { name: 'user', type: 'relation', collection: 'users' },
      { name: 'posts', type: 'relation', collection: 'posts', maxSelect: 10 },
    ],
  },
]);

export const posts = registry.get('posts')!;
export const users = registry.get('users')!;

/** Fixed instant for macros: 2024-05-15 10:20:30.400 UTC, a Wednesday. */
export const NOW = new Date('2024-05-15T10:20:30.400Z');

export const guest: RequestInfo = { auth: null, query: {}, body: {}, method: 'GET' };
export const alice: RequestInfo = {
  auth: { id: 'alice0000000001', name: 'Alice', age: 30, roles: ['admin', 'editor'], active: true },
  query: { q: 'hello', n: '12', bad: 'abc' },
  body: { title: 'New', views: '7', tags: ['a', 'b'], publishedAt: '2024-01-02' },
  method: 'POST',
};

/** A filter context on posts as seen by a normal user, overridable per case. */
export function postsContext(overrides: Partial<FilterContext> = {}): FilterContext {
  return { registry, collection: posts, alias: 'r', request: alice, mode: 'user', now: NOW, ...overrides };
}

/** The BadRequestError `run` throws (any other error is rethrown; none is a failure). */
export function errorOf(run: () => unknown): BadRequestError {
  try {
    run();
  } catch (error) {
    if (error instanceof BadRequestError) return error;
    throw error;
  }
  throw new Error('expected a BadRequestError');
}
