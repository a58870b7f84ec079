import { RecordbaseError, ValidationError } from '../../lib/index.js';
import { OPEN_RULES } from '../support/open-rules.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';
import { expectClientError, sdkClient } from './sdk-fixtures.js';

/** Hooks seen from the pocketbase SDK: a refusal is an ordinary ClientResponseError, a change is in the record. */
describe.each(testEngines())('hooks through the pocketbase SDK against %s', (engine) => {
  let app: TestApp;

  beforeAll(async () => {
    app = await startTestApp(engine, {
      collections: [
        {
          name: 'orders',
          fields: [
            { name: 'item', type: 'text' },
            { name: 'qty', type: 'number' },
            { name: 'placedBy', type: 'text' },
          ],
          rules: OPEN_RULES,
        },
      ],
      hooks: {
        orders: {
          beforeCreate: (e) => {
            if (Number(e.data.qty) > 10) throw new RecordbaseError({ status: 409, code: 'out_of_stock', message: 'Only 10 left.' });
            if (e.data.item === 'bad') throw new ValidationError({ item: { code: 'validation_invalid_value', message: 'We do not sell that.' } });
            e.data.placedBy = e.identity?.id ?? 'guest';
          },
          beforeDelete: () => {
            throw new RecordbaseError({ status: 400, code: 'orders_are_final', message: 'Orders cannot be deleted.' });
          },
        },
      },
    });
  });
  afterAll(async () => {
    await app?.close();
  });

  test('a hook refusal is a ClientResponseError with the hook\'s status, message and data', async () => {
    const pb = sdkClient(app, 'token-alice');
    const conflict = await expectClientError(pb.collection('orders').create({ item: 'pen', qty: 11 }), 409);
    expect(conflict.response).toEqual({ status: 409, message: 'Only 10 left.', data: {} });
    const invalid = await expectClientError(pb.collection('orders').create({ item: 'bad', qty: 1 }), 422);
    expect(invalid.response.data).toEqual({ item: { code: 'validation_invalid_value', message: 'We do not sell that.' } });
    const order = await pb.collection('orders').create({ item: 'pen', qty: 2 });
    expect(order.placedBy).toBe('aliceaaaaaaaaaa');
    const refused = await expectClientError(pb.collection('orders').delete(order.id), 400);
    expect(refused.message).toBe('Orders cannot be deleted.');
    expect((await pb.collection('orders').getOne(order.id)).item).toBe('pen');
  });
});
