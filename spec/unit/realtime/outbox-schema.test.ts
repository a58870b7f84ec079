import { resolveOptions } from '../../../lib/options.js';
import { captureTriggerStatements, instanceChannel, realtimeTableStatements } from '../../../lib/realtime/outbox-schema.js';
import { buildSchemaRegistry } from '../../../lib/schema/collection-schema.js';

const registry = buildSchemaRegistry([{ name: 'posts', fields: [{ name: 'n', type: 'number' }] }]);

describe('realtime schema statements', () => {
  test('three statement-level triggers per table with transition tables, or their removal', () => {
    const on = captureTriggerStatements(registry.collections, true);
    expect(on).toHaveLength(3);
    for (const statement of on) expect(statement).toMatch(/^CREATE OR REPLACE TRIGGER "_recordbase_realtime_\w+" AFTER (INSERT|UPDATE|DELETE) ON "posts" REFERENCING (NEW|OLD) TABLE AS rb_(new|old) FOR EACH STATEMENT/);
    expect(captureTriggerStatements(registry.collections, false)).toEqual([
      'DROP TRIGGER IF EXISTS "_recordbase_realtime_insert" ON "posts"',
      'DROP TRIGGER IF EXISTS "_recordbase_realtime_update" ON "posts"',
      'DROP TRIGGER IF EXISTS "_recordbase_realtime_delete" ON "posts"',
    ]);
  });

  test('the capture function reads whole rows through alias.* (a field may be named like the alias) and pins its search_path', () => {
    const fn = realtimeTableStatements().find((s) => s.includes('FUNCTION'))!;
    expect(fn).toContain('to_jsonb(o.*)');
    expect(fn).toContain('to_jsonb(n.*)');
    expect(fn).toContain('SET search_path FROM CURRENT');
    expect(fn).toContain("pg_notify('recordbase_changes', '')");
    // knex.raw reads ? as a placeholder.
    for (const statement of realtimeTableStatements()) expect(statement).not.toContain('?');
  });

  test('instance channels are valid unquoted identifiers', () => {
    expect(instanceChannel('0123456789abcdef')).toBe('recordbase_i_0123456789abcdef');
  });
});

describe('realtime options', () => {
  const base = { collections: [] };
  test('defaults, and false', () => {
    expect(resolveOptions(base, {}).realtime).toEqual({ heartbeatMs: 25_000, maxClients: 10_000, instanceHeartbeatMs: 5_000, outboxRetentionMs: 600_000, maxClientBufferBytes: 4 * 1024 * 1024 });
    expect(resolveOptions({ ...base, realtime: false }, {}).realtime).toBe(false);
  });
  test.each([
    [{ heartbeatMs: 0 }, /realtime.heartbeatMs/],
    [{ maxClients: 1.5 }, /realtime.maxClients/],
    [{ instanceHeartbeatMs: 2 ** 31 }, /realtime.instanceHeartbeatMs/],
    [{ outboxRetentionMs: -1 }, /realtime.outboxRetentionMs/],
    [{ maxClientBufferBytes: '4' }, /realtime.maxClientBufferBytes/],
  ])('%j throws', (realtime, message) => {
    expect(() => resolveOptions({ ...base, realtime: realtime as never }, {})).toThrow(message);
  });
  test('a non-object throws', () => {
    expect(() => resolveOptions({ ...base, realtime: true as never }, {})).toThrow(/realtime must be/);
  });
});
