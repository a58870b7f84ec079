import PocketBase, { ClientResponseError } from 'pocketbase';
import type { CollectionDefinition } from '../../lib/index.js';
import type { TestApp } from '../support/test-app.js';
import { OPEN_RULES } from '../support/open-rules.js';


/** The collections the SDK suite runs against. */
export function sdkCollections(): CollectionDefinition[] {
  return [
    { name: 'users', fields: [{ name: 'name', type: 'text', required: true }], rules: OPEN_RULES },
    {
      name: 'articles',
      fields: [
        { name: 'title', type: 'text', required: true, max: 200 },
        { name: 'views', type: 'number', min: 0, onlyInt: true },
        { name: 'published', type: 'bool' },
        { name: 'publishedAt', type: 'date' },
        { name: 'contact', type: 'email' },
        { name: 'tags', type: 'select', values: ['a', 'b', 'c'], maxSelect: 3 },
        { name: 'meta', type: 'json' },
        { name: 'author', type: 'relation', collection: 'users' },
        { name: 'editors', type: 'relation', collection: 'users', maxSelect: 5 },
      ],
      rules: OPEN_RULES,
    },
    {
      name: 'comments',
      fields: [
        { name: 'text', type: 'text' },
        { name: 'article', type: 'relation', collection: 'articles' },
      ],
      rules: OPEN_RULES,
    },
    {
      name: 'items',
      fields: [
        { name: 'n', type: 'number' },
        { name: 'parity', type: 'text' },
      ],
      rules: OPEN_RULES,
    },
    {
      name: 'drafts',
      fields: [
        { name: 'title', type: 'text' },
        { name: 'owner', type: 'text' },
        { name: 'published', type: 'bool' },
      ],
      rules: {
        list: 'published = true || owner = @request.auth.id',
        view: 'published = true || owner = @request.auth.id',
        create: '@request.auth.id != ""',
        update: 'owner = @request.auth.id',
        delete: 'owner = @request.auth.id',
      },
    },
    {
      name: 'uploads',
      fields: [
        { name: 'doc', type: 'file' },
        { name: 'tags', type: 'select', values: ['a', 'b', 'c'], maxSelect: 3 },
        { name: 'meta', type: 'json' },
        { name: 'flag', type: 'bool' },
        { name: 'count', type: 'number' },
        { name: 'note', type: 'text' },
        { name: 'day', type: 'date' },
      ],
      rules: OPEN_RULES,
    },
    // every rule null: superusers only
    { name: 'locked', fields: [{ name: 'note', type: 'text' }] },
  ];
}

/** Identity ids of the test tokens (spec/support/test-app.ts). */
export const ALICE = 'aliceaaaaaaaaaa';
export const BOB = 'bobbbbbbbbbbbbb';

/** A 15-character record id: `prefix` padded with zeros and `n`. */
export function fixedId(prefix: string, n: number): string {
  return prefix + String(n).padStart(15 - prefix.length, '0');
}

/** A fresh SDK client for `app`, optionally signed in with one of the test tokens. */
export function sdkClient(app: TestApp, token?: string): PocketBase {
  const pb = new PocketBase(app.baseUrl + '/backend');
  pb.autoCancellation(false);
  if (token) pb.authStore.save(token, null);
  return pb;
}

/**
 * Awaits `promise`, which must reject with a ClientResponseError of `status`, and returns the
 * error. A promise that resolves fails the test. `fromServer: false` is for errors the SDK makes
 * itself (getFirstListItem's 404), whose body has no `status` key.
 */
export async function expectClientError(
  promise: Promise<unknown>,
  status: number,
  { fromServer = true }: { fromServer?: boolean } = {},
): Promise<ClientResponseError> {
  let outcome: unknown;
  try {
    outcome = await promise;
  } catch (err) {
    expect(err).toBeInstanceOf(ClientResponseError);
    const error = err as ClientResponseError;
    expect({ status: error.status, message: error.response?.message }).toEqual({ status, message: expect.any(String) });
    if (fromServer) expect(error.response.status).toBe(status);
    expect(error.isAbort).toBe(false);
    return error;
  }
  throw new Error(`expected a ${status} ClientResponseError, but the call resolved with ${JSON.stringify(outcome)}`);
}

/** The ids of `records`, in order. */
export function idsOf(records: Array<{ id: string }>): string[] {
  return records.map((r) => r.id);
}
