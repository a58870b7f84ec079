import { checkMigrationsOption } from '../../../lib/migrations/migration-definition.js';
import { resolveOptions } from '../../../lib/options.js';
import { columnDefinitionOf, findStorageConversion, storageKindOfDataType, storageKindOfType } from '../../../lib/schema/storage-conversions.js';
import { STORAGE_KINDS, type StorageKind } from '../../../lib/schema/storage-kinds.js';

const up = async () => undefined;

describe('the migrations option', () => {
  test('takes a folder path or an array of uniquely named migrations', () => {
    expect(checkMigrationsOption('migrations', './migrations')).toBe('./migrations');
    const list = [{ name: '002_b', up }, { name: '001_a', up, down: up }];
    expect(checkMigrationsOption('migrations', list)).toBe(list);
    expect(resolveOptions({ collections: [], migrations: list }).migrations).toBe(list);
    expect(resolveOptions({ collections: [] }).migrations).toBeUndefined();
  });

  test.each([
    ['', 'migrations must be a folder path or an array of migrations'],
    [42, 'migrations must be a folder path or an array of { name, up, down? }'],
    [[{ name: 'a' }], 'migrations[0] ("a") must have an up(m) function'],
    [[{ name: 'a', up, down: 'no' }], 'migrations[0] ("a"): down must be a function when given'],
    [[{ name: '../x', up }], 'migrations[0]: a migration name must match'],
    [[{ up }], 'migrations[0]: a migration name must match'],
    [[{ name: 'a', up }, { name: 'a', up }], 'migrations: two migrations are named "a"'],
  ])('refuses %j when the router is created', (value, message) => {
    expect(() => resolveOptions({ collections: [], migrations: value as never })).toThrow(message);
  });
});

describe('storage conversions', () => {
  test('every kind has its column taken apart as its DDL says', () => {
    for (const kind of Object.keys(STORAGE_KINDS) as StorageKind[]) {
      const column = columnDefinitionOf(kind);
      const rebuilt = `${column.type}${column.notNull ? ' NOT NULL' : ''}${column.defaultSql !== undefined ? ` DEFAULT ${column.defaultSql}` : ''}`;
      expect(rebuilt).toBe(STORAGE_KINDS[kind].columnDdl);
    }
    expect(columnDefinitionOf('text')).toEqual({ type: 'text', notNull: true, defaultSql: "''" });
    expect(columnDefinitionOf('number')).toEqual({ type: 'double precision', notNull: false });
  });

  test('the same kind converts as it is; a lossy pair says what must fit; a pair with no safe meaning has none', () => {
    expect(findStorageConversion('text', 'text')!.using('"c"')).toBe('"c"');
    expect(findStorageConversion('text', 'number')!.fits).toBeDefined();
    expect(findStorageConversion('number', 'text')!.fits).toBeUndefined();
    expect(findStorageConversion('date', 'number')).toBeUndefined();
    expect(findStorageConversion('text', 'geoPoint')).toBeUndefined();
  });

  test('the kind of a recorded field, or of a column where its type alone says', () => {
    expect(storageKindOfType('select', true)).toBe('array');
    expect(storageKindOfType('email', false)).toBe('text');
    expect(storageKindOfType('no_such_type', false)).toBeUndefined();
    expect(storageKindOfDataType('double precision')).toBe('number');
    expect(storageKindOfDataType('jsonb')).toBeUndefined();
  });
});
