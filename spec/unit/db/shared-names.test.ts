import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as sharedNames from '../../../lib/db/shared-names.js';
import { quoteIdent } from '../../../lib/sql-fragment.js';
import { isReservedName } from '../../../lib/schema/collection-names.js';
import { buildSchemaRegistry } from '../../../lib/schema/collection-schema.js';

const LIB = fileURLToPath(new URL('../../../lib/', import.meta.url));
/** Postgres cuts identifiers (and channel names) at 63 bytes: two longer names could end up one. */
const MAX_IDENTIFIER_BYTES = 63;

/** The exports of shared-names.ts by the suffix that says what kind of name each is. */
const KINDS = {
  lockKeys: /_LOCK_KEY$/,
  lockPrefixes: /_LOCK_PREFIX$/,
  relations: /_(TABLE|INDEX)$/,
  columns: /_COLUMN$/,
  functions: /_FUNCTION$/,
  triggers: /_TRIGGER$/,
  channels: /_CHANNEL(_PREFIX)?$/,
  applicationNames: /_APPLICATION_NAME$/,
  settings: /_SETTING$/,
} as const;
type Kind = keyof typeof KINDS;

function namesOf(kind: Kind): [string, unknown][] {
  return Object.entries(sharedNames).filter(([name]) => KINDS[kind].test(name));
}

function expectDistinct(values: unknown[]): void {
  expect(values.length).toBeGreaterThan(0);
  expect(new Set(values).size).toBe(values.length);
}

describe('shared names (every name instances on one database share)', () => {
  test('every export is of a kind checked here (a new name must say what it is)', () => {
    const unclassified = Object.keys(sharedNames).filter((name) => name !== 'instanceChannel' && !Object.values(KINDS).some((pattern) => pattern.test(name)));
    expect(unclassified).toEqual([]);
  });

  test('advisory-lock keys are distinct positive 32-bit integers (issue 30 bug 1: the file sweep and the outbox prune shared one)', () => {
    const keys = namesOf('lockKeys').map(([, value]) => value);
    expect(keys.length).toBeGreaterThanOrEqual(3);
    for (const key of keys) expect(Number.isInteger(key) && (key as number) > 0 && (key as number) < 2 ** 31).toBe(true);
    expectDistinct(keys);
  });

  test('text lock prefixes are distinct and none starts another (the key is a hash of prefix and id)', () => {
    const prefixes = namesOf('lockPrefixes').map(([, value]) => value as string);
    expectDistinct(prefixes);
    for (const a of prefixes) for (const b of prefixes) if (a !== b) expect(b.startsWith(a)).toBe(false);
  });

  test('tables and indexes (one namespace in Postgres) are distinct, valid identifiers, under 64 bytes', () => {
    const relations = namesOf('relations').map(([, value]) => value as string);
    expect(relations).toEqual(expect.arrayContaining(['_rb_collections', '_recordbase_settings', '_recordbase_realtime_outbox', '_recordbase_realtime_instances', '_recordbase_realtime_clients']));
    expectDistinct(relations);
    for (const name of [...relations, ...(['functions', 'triggers', 'columns'] as const).flatMap((kind) => namesOf(kind).map(([, v]) => v as string))]) {
      expect(() => quoteIdent(name)).not.toThrow();
      expect(Buffer.byteLength(name)).toBeLessThanOrEqual(MAX_IDENTIFIER_BYTES);
    }
  });

  test("every table, index, function and trigger recordbase shares starts with a prefix no collection may take (lib/schema/collection-names.ts)", () => {
    const objects = [...namesOf('relations'), ...namesOf('functions'), ...namesOf('triggers')].map(([, value]) => value as string);
    expect(objects.length).toBeGreaterThan(10);
    expect(objects.filter((name) => !isReservedName(name))).toEqual([]);
    for (const name of objects) expect(() => buildSchemaRegistry([{ name, type: 'view', viewQuery: 'SELECT 1 AS id' }])).toThrow(/reserved/);
  });

  test('keys of the settings table are distinct, the file-token secret among them', () => {
    const keys = namesOf('settings').map(([, value]) => value);
    expect(keys).toContain('file_token_secret');
    expectDistinct(keys);
  });

  test('capture triggers are distinct', () => {
    expectDistinct(namesOf('triggers').map(([, value]) => value));
  });

  test('NOTIFY channels are distinct: no instance channel can be the changes channel, and each fits 63 bytes', () => {
    const { CHANGES_CHANNEL, INSTANCE_CHANNEL_PREFIX, instanceChannel } = sharedNames;
    expectDistinct(namesOf('channels').map(([, value]) => value));
    expect(CHANGES_CHANNEL.startsWith(INSTANCE_CHANNEL_PREFIX)).toBe(false);
    // Instance ids are 16 hex characters (realtime-hub.ts): lower case, so LISTEN "..." and pg_notify agree.
    const channel = instanceChannel('0123456789abcdef');
    expect(channel).toBe('recordbase_i_0123456789abcdef');
    expect(channel).toBe(channel.toLowerCase());
    expect(Buffer.byteLength(channel)).toBeLessThanOrEqual(MAX_IDENTIFIER_BYTES);
  });
});

/** Every .ts file under lib/, with its code (block comments and whole-line comments taken out). */
function readLibrary(): { file: string; code: string }[] {
  const files: { file: string; code: string }[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (entry.name.endsWith('.ts')) {
        const code = readFileSync(full, 'utf8').replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');
        files.push({ file: path.relative(LIB, full).split(path.sep).join('/'), code });
      }
    }
  };
  walk(LIB);
  return files;
}

describe('shared names are declared once, and db/ owns the SQL', () => {
  const library = readLibrary();

  test('no module but shared-names.ts writes a shared name or lock key as a literal', () => {
    const found: string[] = [];
    const texts = Object.values(sharedNames as Record<string, unknown>).filter((value): value is string => typeof value === 'string');
    const keys = namesOf('lockKeys').map(([, value]) => String(value));
    for (const { file, code } of library) {
      if (file === 'db/shared-names.ts') continue;
      for (const text of texts) if (['"', "'", '`'].some((quote) => code.includes(quote + text))) found.push(`${file}: ${text}`);
      for (const key of keys) if (new RegExp(key.split('').join('_?')).test(code)) found.push(`${file}: ${key}`);
    }
    expect(found).toEqual([]);
  });

  test('advisory locks are taken in db/statements/advisory-lock.ts only', () => {
    const takers = library.filter(({ file, code }) => file !== 'db/statements/advisory-lock.ts' && /pg_(try_)?advisory|hashtext/.test(code)).map(({ file }) => file);
    expect(takers).toEqual([]);
  });

  test('realtime runs no SQL of its own, nor holds SQL text (its statements are in db/), and db/ imports nothing from realtime/', () => {
    const realtimeSql = library
      .filter(({ file, code }) => file.startsWith('realtime/') && (/\.(raw|query|transaction)\(/.test(code) || /['"`]\s*(SELECT|INSERT|UPDATE|DELETE|WITH)\s/.test(code)))
      .map(({ file }) => file);
    expect(realtimeSql).toEqual([]);
    const importsRealtime = (file: string, code: string) => [...code.matchAll(/from '(\.\.?\/[^']+)'/g)].some((m) => path.posix.join(path.posix.dirname(file), m[1]!).startsWith('realtime/'));
    const upward = library.filter(({ file, code }) => file.startsWith('db/') && importsRealtime(file, code)).map(({ file }) => file);
    expect(upward).toEqual([]);
  });
});
