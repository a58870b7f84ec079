import { clientKeyOfAddress, FairGate, GateTicket, type FairGateLimits, type GateRefusal } from '../../../../lib/db/statements/fair-gate.js';

/** A gate and a log of the units whose turn came (by name), in order. */
function gateWith(limits: Partial<FairGateLimits>) {
  const gate = new FairGate({ capacity: 1, maxHeldPerClient: 1, maxWaitingPerClient: 10, maxWaiting: 100, ...limits });
  const turns: string[] = [];
  const tickets = new Map<string, GateTicket>();
  const enter = (client: string, name: string): GateTicket | GateRefusal => {
    const entry = gate.enter(client, () => turns.push(name));
    if (entry instanceof GateTicket) {
      tickets.set(name, entry);
      if (entry.granted) turns.push(name);
    }
    return entry;
  };
  const leave = (name: string) => tickets.get(name)!.leave();
  return { gate, turns, enter, leave };
}

describe('FairGate', () => {
  test('grants at once while there is room, in total and for the client', () => {
    const { gate, turns, enter } = gateWith({ capacity: 3, maxHeldPerClient: 2 });
    enter('a', 'a1');
    enter('a', 'a2');
    enter('b', 'b1');
    expect(turns).toEqual(['a1', 'a2', 'b1']);
    expect(gate.counts).toEqual({ held: 3, waiting: 0, clients: 2 });
  });

  test("a client at its share waits although the pool has room; another client's unit does not", () => {
    const { gate, turns, enter, leave } = gateWith({ capacity: 5, maxHeldPerClient: 2 });
    enter('a', 'a1');
    enter('a', 'a2');
    const third = enter('a', 'a3');
    expect(third).toMatchObject({ granted: false });
    enter('b', 'b1');
    expect(turns).toEqual(['a1', 'a2', 'b1']);
    expect(gate.counts).toEqual({ held: 3, waiting: 1, clients: 2 });
    leave('a1');
    expect(turns).toEqual(['a1', 'a2', 'b1', 'a3']);
  });

  test("a client's next unit waits behind the units other clients have waiting, whatever came first", () => {
    const { turns, enter, leave } = gateWith({});
    enter('a', 'a1');
    enter('a', 'a2');
    enter('a', 'a3');
    enter('b', 'b1');
    enter('c', 'c1');
    leave('a1');
    expect(turns).toEqual(['a1', 'b1']);
    leave('b1');
    expect(turns).toEqual(['a1', 'b1', 'c1']);
    leave('c1');
    leave('a2');
    expect(turns).toEqual(['a1', 'b1', 'c1', 'a2', 'a3']);
  });

  test('clients that keep units waiting take turns one unit at a time, oldest last turn first', () => {
    const { turns, enter, leave } = gateWith({});
    enter('a', 'a1');
    for (const name of ['a2', 'a3', 'a4']) enter('a', name);
    for (const name of ['b1', 'b2']) enter('b', name);
    for (const name of ['a1', 'b1', 'a2', 'b2', 'a3']) leave(name);
    expect(turns).toEqual(['a1', 'b1', 'a2', 'b2', 'a3', 'a4']);
  });

  test('over its queue a client is refused at once, naming the bound; others still wait', () => {
    const { gate, enter } = gateWith({ maxWaitingPerClient: 2, maxWaiting: 3 });
    enter('a', 'a1');
    enter('a', 'a2');
    enter('a', 'a3');
    expect(enter('a', 'a4')).toEqual({ refused: 'client', limit: 2 });
    expect(enter('b', 'b1')).toMatchObject({ granted: false });
    expect(enter('c', 'c1')).toEqual({ refused: 'all', limit: 3 });
    expect(gate.counts).toEqual({ held: 1, waiting: 3, clients: 2 });
  });

  test('a unit that leaves while waiting never gets a turn, frees its place, and an idle client is forgotten', () => {
    const { gate, turns, enter, leave } = gateWith({ maxWaitingPerClient: 1 });
    enter('a', 'a1');
    enter('b', 'b1');
    expect(enter('b', 'b2')).toEqual({ refused: 'client', limit: 1 });
    leave('b1');
    expect(gate.counts).toEqual({ held: 1, waiting: 0, clients: 1 });
    expect(enter('b', 'b2')).toMatchObject({ granted: false });
    leave('a1');
    expect(turns).toEqual(['a1', 'b2']);
    leave('b2');
    leave('b2');
    expect(gate.counts).toEqual({ held: 0, waiting: 0, clients: 0 });
  });

  test('units that come and leave while their client is not served do not pile up', () => {
    const { gate, turns, enter, leave } = gateWith({ maxWaitingPerClient: 3 });
    enter('a', 'a1');
    for (let i = 0; i < 10_000; i++) {
      enter('b', `b${i}`);
      leave(`b${i}`);
    }
    enter('b', 'last');
    leave('a1');
    expect(turns).toEqual(['a1', 'last']);
    expect(gate.counts).toEqual({ held: 1, waiting: 0, clients: 1 });
  });

  test('a unit may enter the gate again from its turn (the books are straight by then)', () => {
    const gate = new FairGate({ capacity: 1, maxHeldPerClient: 1, maxWaitingPerClient: 10, maxWaiting: 100 });
    const first = gate.enter('a', () => undefined) as GateTicket;
    const nested: GateTicket[] = [];
    gate.enter('b', () => nested.push(gate.enter('b', () => undefined) as GateTicket));
    first.leave();
    expect(nested).toHaveLength(1);
    expect(nested[0]!.granted).toBe(false);
    expect(gate.counts).toEqual({ held: 1, waiting: 1, clients: 1 });
  });
});

describe('clientKeyOfAddress', () => {
  test.each([
    ['203.0.113.7', '203.0.113.7'],
    ['::ffff:203.0.113.7', '203.0.113.7'],
    ['::FFFF:127.0.0.1', '127.0.0.1'],
    ['2001:db8:1:2:3:4:5:6', '2001:db8:1:2::/64'],
    ['2001:0db8:0001:0002::9', '2001:db8:1:2::/64'],
    ['2001:db8::1', '2001:db8:0:0::/64'],
    ['::1', '0:0:0:0::/64'],
    ['fe80::1%eth0', 'fe80:0:0:0::/64'],
    ['not an address', 'not an address'],
  ])('%s is %s', (address, key) => {
    expect(clientKeyOfAddress(address)).toBe(key);
  });

  test('no address is no key', () => {
    expect(clientKeyOfAddress(undefined)).toBeUndefined();
  });
});
