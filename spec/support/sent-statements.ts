import { afterAll, beforeAll } from '@jest/globals';
import pg from 'pg';
import { contextOfConnection } from '../../lib/db/statements/statement-bounds.js';

/**
 * The statements requests send from now on in this test file, as the driver sees them
 * (node-postgres's `Client.prototype.query`, which both engines go through), counted as
 * spec/integration/statement-counts.test.ts does: only on connections bound to a request's
 * database context, without the pool's per-connection `set search_path`. Empty the array before
 * the request to count. Call it at the top level of a suite; a suite that counts should start its
 * app with `realtime: false`, whose background statements would be counted too.
 */
export function recordSentStatements(): string[] {
  const sent: string[] = [];
  const originalQuery = pg.Client.prototype.query;
  beforeAll(() => {
    pg.Client.prototype.query = function countedQuery(this: pg.Client, ...args: unknown[]) {
      const config = args[0] as string | { text?: string };
      const text = typeof config === 'string' ? config : (config.text ?? '');
      if (contextOfConnection(this) !== undefined && !/^set search_path to /i.test(text)) sent.push(text);
      return (originalQuery as (...a: unknown[]) => unknown).apply(this, args);
    } as typeof pg.Client.prototype.query;
  });
  afterAll(() => {
    pg.Client.prototype.query = originalQuery;
  });
  return sent;
}
