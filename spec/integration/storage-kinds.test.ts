import { STORAGE_KINDS, type StorageKind } from '../../lib/schema/storage-kinds.js';
import { bindValue, quoteIdent, rawSql, sql, type SqlFragment } from '../../lib/sql-fragment.js';
import type { Knex } from 'knex';
import { openTestDatabase, testEngines, type TestDatabase } from '../support/test-database.js';

/**
 * A non-empty value of each kind, its text form as a filter compares it, and whether the kind's
 * empty value is empty to a filter (`f = null`): `false` is a value (docs/query-language.md).
 */
const SAMPLES: Record<StorageKind, { value: unknown; text: string; emptyIsNull: boolean }> = {
  text: { value: 'héllo', text: 'héllo', emptyIsNull: true },
  array: { value: ['a', 'b'], text: '["a", "b"]', emptyIsNull: true },
  bool: { value: true, text: 'true', emptyIsNull: false },
  number: { value: 12.5, text: '12.5', emptyIsNull: true },
  date: { value: '2024-05-01 10:20:30.400Z', text: '2024-05-01 10:20:30.400Z', emptyIsNull: true },
  json: { value: { a: [1, 'x'] }, text: '{"a": [1, "x"]}', emptyIsNull: true },
  geoPoint: { value: { lon: 23.32, lat: 42.69 }, text: '{"lat": 42.69, "lon": 23.32}', emptyIsNull: true },
};

/**
 * Every row of the storage kind table agrees with what Postgres does with it, on both engines:
 * the column it declares is the type the sync recognises, its default reads as the empty value,
 * the emptiness test holds for that default and for a missing related row, and a bound value
 * comes back as it went in.
 */
describe.each(testEngines())('storage kinds on %s', (engine) => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await openTestDatabase(engine);
  });
  afterAll(async () => {
    await database?.destroy();
  });

  async function selectOne(fragment: SqlFragment): Promise<unknown> {
    const result = (await database.db.raw(`SELECT ${fragment.sql} AS v`, fragment.bindings as Knex.RawBinding[])) as { rows: { v: unknown }[] };
    return result.rows[0]!.v;
  }

  test.each(Object.keys(STORAGE_KINDS) as StorageKind[])('%s', async (kind) => {
    const spec = STORAGE_KINDS[kind];
    const table = quoteIdent(`kind_${kind}`);
    await database.db.raw(`CREATE TABLE ${table} ("id" int PRIMARY KEY, "v" ${spec.columnDdl})`);
    const [column] = await database.db
      .select('data_type')
      .from('information_schema.columns')
      .whereRaw('table_schema = current_schema()')
      .andWhere({ table_name: `kind_${kind}`, column_name: 'v' });
    expect(column.data_type).toBe(spec.dataType);

    // A row written without the column (older code's insert) holds the empty value.
    const sample = SAMPLES[kind];
    await database.db.raw(`INSERT INTO ${table} ("id") VALUES (1)`);
    await database.db.raw(`INSERT INTO ${table} ("id", "v") VALUES (2, ?::${spec.bindCast})`, [spec.toColumn(sample.value) as Knex.RawBinding]);
    const v = rawSql(`${table}."v"`);
    const rows = (await database.db.raw(`SELECT "id", "v", ${spec.isEmptySql(v).sql} AS "empty", ${spec.toTextSql(v).sql} AS "text" FROM ${table} ORDER BY "id"`)) as {
      rows: { id: number; v: unknown; empty: boolean; text: string | null }[];
    };
    const [defaulted, written] = rows.rows;
    expect(spec.readColumn(defaulted!.v)).toEqual(spec.emptyValue());
    expect(defaulted!.empty).toBe(sample.emptyIsNull);
    expect(spec.readColumn(written!.v)).toEqual(sample.value);
    expect(written!.empty).toBe(false);
    expect(written!.text).toBe(sample.text);

    // A relation hop to a missing row reads NULL; filled, it reads as a stored empty value does.
    const missing = sql`(SELECT ${v} FROM ${table} WHERE "id" = 0)`;
    expect(await selectOne(spec.isEmptySql(spec.fillEmptySql(missing)))).toBe(sample.emptyIsNull);
    expect(await selectOne(sql`${spec.fillEmptySql(missing)} IS NULL`)).toBe(!spec.neverNull);
    // The empty value bound with its cast reads so too (a create rule reads a new row so).
    expect(await selectOne(spec.isEmptySql(bindValue(spec.toColumn(spec.emptyValue()) ?? null, spec.bindCast)))).toBe(sample.emptyIsNull);
  });
});
