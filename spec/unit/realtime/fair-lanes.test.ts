import { describe, expect, test } from '@jest/globals';
import { FairLanes } from '../../../lib/realtime/fair-lanes.js';

/** Turns among owners with work: round robin across groups first, then owners, at most `concurrency` at once. */
describe('FairLanes', () => {
  function lanes(concurrency: number, work: Map<string, number>) {
    const order: string[] = [];
    let running = 0;
    let most = 0;
    const fair: FairLanes<string> = new FairLanes<string>({
      concurrency,
      groupOf: (owner) => owner.split(':')[0],
      run: async (owner) => {
        running++;
        most = Math.max(most, running);
        order.push(owner);
        await new Promise((resolve) => setImmediate(resolve));
        running--;
        const left = (work.get(owner) ?? 0) - 1;
        work.set(owner, left);
        if (left > 0) fair.wake(owner);
      },
      onError: () => undefined,
    });
    return { fair, order, most: () => most };
  }

  test('one group with many owners and much work takes one turn per round beside another group', async () => {
    const work = new Map([
      ['attacker:1', 5],
      ['attacker:2', 5],
      ['attacker:3', 5],
      ['honest:1', 2],
    ]);
    const { fair, order } = lanes(1, work);
    for (const owner of ['attacker:1', 'attacker:2', 'attacker:3', 'honest:1']) fair.wake(owner);
    await fair.idle();
    // Each round gives each group one turn: the honest owner's two turns come within the first
    // five, however much the other group has waiting (a1 started before honest woke).
    expect(order.slice(0, 5).filter((o) => o === 'honest:1')).toHaveLength(2);
    expect(order.filter((o) => o.startsWith('attacker'))).toHaveLength(15);
  });

  test('at most `concurrency` turns at once; an owner woken while it waits still gets one turn, one woken while it runs another', async () => {
    const work = new Map(Array.from({ length: 10 }, (_, i) => [`g${i}:o`, 1]));
    const { fair, order, most } = lanes(2, work);
    for (const owner of work.keys()) fair.wake(owner);
    for (const owner of work.keys()) fair.wake(owner);
    await fair.idle();
    // g0 and g1 were running when woken again: one more turn each; the eight waiting ones one turn.
    expect(order).toHaveLength(12);
    expect(most()).toBe(2);
  });
});
