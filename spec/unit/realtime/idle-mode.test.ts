import { describe, expect, test } from '@jest/globals';
import { resolveOptions } from '../../../lib/options.js';
import { IdleMode } from '../../../lib/realtime/idle-mode.js';

/** Idle mode's switch (lib/realtime/idle-mode.ts): when it sleeps and wakes, and in what order. */

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function makeIdle(idleAfterMs: number | false, wake: () => Promise<void> = async () => undefined) {
  const events: string[] = [];
  const idle = new IdleMode({
    idleAfterMs,
    sleep: async () => {
      events.push('sleep');
      await pause(30);
      events.push('slept');
    },
    wake: async () => {
      events.push('wake');
      await wake();
      events.push('woke');
    },
    report: (message) => void events.push(`report: ${message}`),
  });
  return { idle, events };
}

describe('IdleMode', () => {
  test('sleeps idleAfterMs after start with no hold, and a hold wakes it before it resolves', async () => {
    const { idle, events } = makeIdle(20);
    idle.start();
    await pause(80);
    expect(events).toEqual(['sleep', 'slept']);
    expect(idle.sleeping).toBe(true);
    const release = await idle.hold();
    expect(events).toEqual(['sleep', 'slept', 'wake', 'woke']);
    expect(idle.sleeping).toBe(false);
    // Held: it stays awake however long.
    await pause(80);
    expect(events).toHaveLength(4);
    release();
    release(); // a second call does nothing (the count would go below zero)
    await pause(80);
    expect(events).toEqual(['sleep', 'slept', 'wake', 'woke', 'sleep', 'slept']);
    await idle.close();
  });

  test('a hold taken while it falls asleep waits for the sleep to end, then wakes it', async () => {
    const { idle, events } = makeIdle(10);
    idle.start();
    await pause(20); // the sleep (30 ms) has begun
    expect(events).toEqual(['sleep']);
    const release = await idle.hold();
    expect(events).toEqual(['sleep', 'slept', 'wake', 'woke']);
    expect(idle.sleeping).toBe(false);
    release();
    await idle.close();
  });

  test('a failed wake fails the hold, releases it and leaves it asleep; the next hold wakes it', async () => {
    let fail = true;
    const { idle, events } = makeIdle(10, async () => {
      if (fail) throw new Error('the database is away');
    });
    idle.start();
    await pause(60);
    await expect(idle.hold()).rejects.toThrow('the database is away');
    expect(idle.sleeping).toBe(true);
    fail = false;
    const release = await idle.hold();
    expect(idle.sleeping).toBe(false);
    expect(events).toEqual(['sleep', 'slept', 'wake', 'wake', 'woke']);
    release();
    await idle.close();
  });

  test('idleAfterMs false never sleeps; close stops the count', async () => {
    const never = makeIdle(false);
    never.idle.start();
    await pause(50);
    expect(never.events).toEqual([]);
    const closed = makeIdle(20);
    closed.idle.start();
    await closed.idle.close();
    await pause(50);
    expect(closed.events).toEqual([]);
  });
});

describe('realtime.idleAfterMs', () => {
  const idleAfterMs = (given: unknown) => {
    const realtime = resolveOptions({ collections: [], realtime: { idleAfterMs: given as number } }, {}).realtime;
    return realtime === false ? 'off' : realtime.idleAfterMs;
  };

  test('15 s by default, a duration, or false for never; 0, a negative or a string throws', () => {
    expect(idleAfterMs(undefined)).toBe(15_000);
    expect(idleAfterMs(500)).toBe(500);
    expect(idleAfterMs(false)).toBe(false);
    for (const bad of [0, -1, '15000', true]) expect(() => idleAfterMs(bad)).toThrow(/realtime\.idleAfterMs/);
  });
});
