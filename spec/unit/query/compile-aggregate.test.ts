import { buildSchemaRegistry } from '../../../lib/schema/collection-schema.js';
import { compileAggregate, selectColumns, MAX_AGGREGATES, MAX_GROUP_FIELDS } from '../../../lib/query/compile-aggregate.js';

/** compileAggregate decides every refusal from the schema alone and compiles one grouped SELECT's parts (docs/search.md, "Aggregates"). */

const registry = buildSchemaRegistry([
  {
    name: 'orders',
    fields: [
      { name: 'status', type: 'text' },
      { name: 'amount', type: 'number' },
      { name: 'secret', type: 'number', hidden: true },
      { name: 'cost', type: 'number', rules: { view: '@request.auth.id != ""' } },
      { name: 'author', type: 'relation', collection: 'orders' },
    ],
  },
]);
const orders = registry.get('orders')!;
const user = { superuser: false };
const root = { superuser: true };

describe('compileAggregate', () => {
  test('without fields, count(); without sort, the group fields ascending; a sort is followed by the group fields it leaves out', () => {
    expect(compileAggregate(orders, {}, user)).toMatchObject({ groups: [], aggregates: [{ name: 'count', storage: 'count' }], order: [] });
    const plan = compileAggregate(orders, { groupBy: ' status , author ', fields: 'count(), sum( amount ),max(created)', sort: '-sum_amount,author' }, user);
    expect(plan.groups.map((g) => g.name)).toEqual(['status', 'author']);
    expect(plan.aggregates.map((a) => [a.name, a.storage])).toEqual([
      ['count', 'count'],
      ['sum_amount', 'number'],
      ['max_created', 'date'],
    ]);
    expect(plan.order).toEqual([
      { column: 3, descending: true },
      { column: 1, descending: false },
      { column: 0, descending: false },
    ]);
    expect(selectColumns(plan).sql).toBe('"r"."status" AS "c0", "r"."author" AS "c1", count(*)::float8 AS "c2", sum("r"."amount") AS "c3", max("r"."created") AS "c4"');
  });

  test('a hidden field is unknown and a field with a view rule refused to non-superusers, in every place; superusers use both', () => {
    for (const input of [{ groupBy: 'secret' }, { fields: 'sum(secret)' }, { fields: 'max(secret)' }]) {
      expect(() => compileAggregate(orders, input, user)).toThrow('unknown field "secret"');
      expect(() => compileAggregate(orders, input, root)).not.toThrow();
    }
    for (const input of [{ groupBy: 'cost' }, { fields: 'avg(cost)' }, { fields: 'min(cost)' }]) {
      expect(() => compileAggregate(orders, input, user)).toThrow('The field "cost" has a view rule: only superusers may group or aggregate it.');
      expect(() => compileAggregate(orders, input, root)).not.toThrow();
    }
  });

  test('the bounds: group fields, aggregates, parameter length', () => {
    expect(() => compileAggregate(orders, { groupBy: Array(MAX_GROUP_FIELDS + 1).fill('status').join(',') }, root)).toThrow(`at most ${MAX_GROUP_FIELDS}`);
    expect(() => compileAggregate(orders, { fields: Array(MAX_AGGREGATES + 1).fill('count()').join(',') }, root)).toThrow(`at most ${MAX_AGGREGATES}`);
    expect(() => compileAggregate(orders, { fields: `${'count(),'.repeat(200)}count()` }, root)).toThrow('too long');
  });
});
