import { resolveOptions } from '../../../../lib/options.js';
import { captureTriggerStatements, realtimeTableStatements } from '../../../../lib/db/realtime/realtime-schema.js';
import { instanceChannel } from '../../../../lib/db/shared-names.js';
import { buildSchemaRegistry } from '../../../../lib/schema/collection-schema.js';

const registry = buildSchemaRegistry([{ name: 'posts', fields: [{ name: 'n', type: 'number' }] }]);

describe('realtime schema statements', () => {
  test('three statement-level triggers per table with transition tables, each naming the collection id, made only where missing or naming another; never removed', () => {
    const on = captureTriggerStatements(registry.collections);
    const id = registry.collections[0]!.id;
    expect(on).toHaveLength(3);
    for (const statement of on) {
      expect(statement).toMatch(/IF NOT EXISTS \(SELECT 1 FROM pg_trigger WHERE tgrelid = format\('%I\.%I', current_schema\(\), 'posts'\)::regclass AND tgname = '_recordbase_realtime_\w+'\s+AND tgargs = convert_to\('(\w+)', 'UTF8'\) \|\| '\\x00'::bytea\)/);
      expect(statement).toContain(`convert_to('${id}', 'UTF8')`);
      expect(statement).toMatch(/CREATE OR REPLACE TRIGGER "_recordbase_realtime_\w+" AFTER (INSERT|UPDATE|DELETE) ON "posts" REFERENCING (NEW|OLD) TABLE AS rb_(new|old) FOR EACH STATEMENT/);
      expect(statement).toContain(`EXECUTE FUNCTION "_recordbase_realtime_capture"('${id}')`);
      expect(statement).not.toMatch(/DROP/);
    }
  });

  const captureFunction = () => realtimeTableStatements().find((s) => s.includes('RETURNS trigger'))!;

  test('the capture function writes nothing unless a client subscribes to the collection (name or id) or reads other tables, and a realtime instance is live; a delete carries its snapshot', () => {
    const fn = captureFunction();
    expect(fn).toContain(`NOT EXISTS (SELECT 1 FROM "_recordbase_realtime_clients" WHERE "topic_keys" && ARRAY[TG_TABLE_NAME::text, TG_ARGV[0]])`);
    expect(fn).toContain(`AND NOT EXISTS (SELECT 1 FROM "_recordbase_realtime_clients" WHERE "reads_other_tables" IS NOT FALSE))`);
    expect(fn).toContain(`OR NOT EXISTS (SELECT 1 FROM "_recordbase_realtime_instances" WHERE COALESCE("expires_at", "heartbeat_at" + interval '1 minute') > now()) THEN`);
    expect(fn).toContain('pg_current_snapshot()');
  });

  test('columns and indexes of older databases are added only where missing (no table lock otherwise)', () => {
    const statements = realtimeTableStatements();
    expect(statements.filter((s) => /ALTER TABLE/.test(s)).every((s) => s.startsWith('DO $do$') && s.includes('information_schema.columns'))).toBe(true);
    expect(statements.filter((s) => /CREATE INDEX/.test(s)).every((s) => s.startsWith('DO $do$') && s.includes('to_regclass'))).toBe(true);
    expect(statements.filter((s) => /ALTER TABLE/.test(s)).map((s) => /ADD COLUMN IF NOT EXISTS "(\w+)"/.exec(s)?.[1])).toEqual(['snapshot', 'traceparent', 'expires_at', 'topic_keys', 'reads_other_tables']);
  });

  test('the capture function reads whole rows through alias.* (a field may be named like the alias) and pins its search_path', () => {
    const fn = captureFunction();
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
    expect(resolveOptions(base, {}).realtime).toMatchObject({
      heartbeatMs: 25_000,
      maxClients: 10_000,
      maxClientsPerAddress: 100,
      maxClientsPerIdentity: 50,
      instanceHeartbeatMs: 5_000,
      outboxRetentionMs: 600_000,
      maxClientBufferBytes: 4 * 1024 * 1024,
      checkTimeoutMs: 250, // the embedded default statement timeout, lower than 500
    });
    expect(resolveOptions({ ...base, realtime: false }, {}).realtime).toBe(false);
  });
  test.each([
    [{ heartbeatMs: 0 }, /realtime.heartbeatMs/],
    [{ maxClients: 1.5 }, /realtime.maxClients/],
    [{ maxClientsPerAddress: 0 }, /realtime.maxClientsPerAddress/],
    [{ maxClientsPerIdentity: '5' }, /realtime.maxClientsPerIdentity/],
    [{ instanceHeartbeatMs: 2 ** 31 }, /realtime.instanceHeartbeatMs/],
    [{ outboxRetentionMs: -1 }, /realtime.outboxRetentionMs/],
    [{ maxClientBufferBytes: '4' }, /realtime.maxClientBufferBytes/],
    [{ checkTimeoutMs: 2 ** 31 }, /realtime.checkTimeoutMs/],
  ])('%j throws', (realtime, message) => {
    expect(() => resolveOptions({ ...base, realtime: realtime as never }, {})).toThrow(message);
  });
  test('a non-object throws', () => {
    expect(() => resolveOptions({ ...base, realtime: true as never }, {})).toThrow(/realtime must be/);
  });
});
