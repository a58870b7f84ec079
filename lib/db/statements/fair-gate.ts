import { isIP } from 'node:net';

/** The bounds of a FairGate (see shareConnectionsFairly for where they come from). */
export interface FairGateLimits {
  /** Units that may hold a connection at once, all clients together: the pool's size. */
  capacity: number;
  /** Units one client may hold at once. */
  maxHeldPerClient: number;
  /** Units one client may have waiting; one more is refused at once. */
  maxWaitingPerClient: number;
  /** Units all clients together may have waiting; one more is refused at once. */
  maxWaiting: number;
}

/** Why a unit was refused at the gate: its client's queue is full, or everyone's is. */
export interface GateRefusal {
  readonly refused: 'client' | 'all';
  /** The bound that was reached. */
  readonly limit: number;
}

/**
 * One client's units at the gate: those holding a connection, those waiting in arrival order,
 * and when it last had a turn (a number of the gate's turns, 0 for never), which orders it
 * among the clients that wait.
 */
class ClientLane {
  held = 0;
  /** Waiting units, oldest first; those that left while waiting are skipped when their turn comes. */
  queue: GateTicket[] = [];
  waiting = 0;
  lastTurn = 0;
  /** Whether the lane is in the gate's `ready` list (it has waiting units and room for one more). */
  ready = false;

  constructor(readonly key: string) {}
}

/**
 * A unit's place at the gate: waiting until `granted`, then holding its turn until `leave()`.
 * `leave()` is the one way out, whichever state the unit is in, and may be called more than once.
 */
export class GateTicket {
  granted = false;
  private left = false;

  constructor(
    private readonly gate: FairGate,
    readonly lane: ClientLane,
    /** Called once when a ticket that waited is granted (never for one granted at `enter`). */
    readonly onTurn: () => void,
  ) {}

  /** Whether the unit has left the gate. */
  get hasLeft(): boolean {
    return this.left;
  }

  /** Gives the turn back (or the place in the queue); the gate hands it to the next client in line. */
  leave(): void {
    if (this.left) return;
    this.left = true;
    this.gate.release(this);
  }
}

/**
 * Shares a database pool fairly among clients, so that one client's slow statements never make
 * another client's requests fail. Every unit of work with a client key passes the gate before it
 * takes a pooled connection. At most `capacity` units hold a turn at once, at most
 * `maxHeldPerClient` of one client; the others wait in per-client queues, and a free turn goes to
 * the waiting client whose last turn is oldest (one that never had one first). So a client's next
 * unit waits behind the units other clients have waiting: a client with ten slow units in flight
 * delays another client by at most one of them. The queues are bounded by count, per client and in
 * total: over them a unit is refused at once, without waiting for a timeout.
 *
 * Only order and counts are kept here: the time a unit may wait (the acquire timeout) is the
 * caller's, which calls `leave()` when it gives up. A unit must not wait for a second turn
 * while it holds one under the same key: with one turn per client it would wait for itself.
 */
export class FairGate {
  private readonly lanes = new Map<string, ClientLane>();
  /** Lanes with waiting units and room for one more, by last turn (oldest first). */
  private readonly readyLanes: ClientLane[] = [];
  private held = 0;
  private waiting = 0;
  private turns = 0;

  constructor(readonly limits: FairGateLimits) {}

  /**
   * A place for one unit of `client`: granted at once when there is room (`granted`; `onTurn` is
   * not called), or waiting, in which case `onTurn` is called when its turn comes; or the
   * refusal when the unit would wait and its client's queue, or everyone's, is full.
   */
  enter(client: string, onTurn: () => void): GateTicket | GateRefusal {
    let lane = this.lanes.get(client);
    if (lane === undefined) {
      lane = new ClientLane(client);
      this.lanes.set(client, lane);
    }
    const ticket = new GateTicket(this, lane, onTurn);
    // Room now means nobody waits for it: a lane with waiting units and room would have been served.
    if (this.held < this.limits.capacity && lane.held < this.limits.maxHeldPerClient) {
      this.grant(ticket);
      return ticket;
    }
    const refusal: GateRefusal | undefined =
      lane.waiting >= this.limits.maxWaitingPerClient
        ? { refused: 'client', limit: this.limits.maxWaitingPerClient }
        : this.waiting >= this.limits.maxWaiting
          ? { refused: 'all', limit: this.limits.maxWaiting }
          : undefined;
    if (refusal !== undefined) {
      this.forgetIfIdle(lane);
      return refusal;
    }
    lane.queue.push(ticket);
    lane.waiting++;
    this.waiting++;
    if (lane.held < this.limits.maxHeldPerClient) this.markReady(lane);
    return ticket;
  }

  /** Units holding a turn and units waiting, all clients together (for tests and diagnostics). */
  get counts(): { held: number; waiting: number; clients: number } {
    return { held: this.held, waiting: this.waiting, clients: this.lanes.size };
  }

  /** A ticket leaves (GateTicket.leave): out of its queue, or its turn goes to the next in line. */
  release(ticket: GateTicket): void {
    const lane = ticket.lane;
    if (ticket.granted) {
      lane.held--;
      this.held--;
      if (lane.waiting > 0) this.markReady(lane);
      this.serve();
    } else {
      // Stays in the queue array until its turn would come (skipped there): no search per leave.
      // Compacted once the departed outnumber the waiting, so that units that keep leaving
      // (clients that give up) cannot grow the queue of a lane that is not being served.
      lane.waiting--;
      this.waiting--;
      if (lane.queue.length > 2 * lane.waiting + 16) lane.queue = lane.queue.filter((waiting) => !waiting.hasLeft);
    }
    this.forgetIfIdle(lane);
  }

  /** Hands free turns to waiting units, the lane with the oldest last turn first. */
  private serve(): void {
    const served: GateTicket[] = [];
    while (this.held < this.limits.capacity && this.readyLanes.length > 0) {
      const lane = this.readyLanes.shift()!;
      lane.ready = false;
      const ticket = this.nextWaiting(lane);
      if (ticket === undefined) continue;
      lane.waiting--;
      this.waiting--;
      this.grant(ticket);
      if (lane.waiting > 0 && lane.held < this.limits.maxHeldPerClient) this.markReady(lane);
      served.push(ticket);
    }
    // After the books are straight: a callback may enter or leave the gate again.
    for (const ticket of served) ticket.onTurn();
  }

  private grant(ticket: GateTicket): void {
    ticket.granted = true;
    ticket.lane.held++;
    this.held++;
    ticket.lane.lastTurn = ++this.turns;
  }

  /** The lane's first waiting ticket, dropping those that left while they waited. */
  private nextWaiting(lane: ClientLane): GateTicket | undefined {
    while (lane.queue.length > 0) {
      const ticket = lane.queue.shift()!;
      if (!ticket.hasLeft) return ticket;
    }
    return undefined;
  }

  /** Puts `lane` among the ready lanes, after every lane whose last turn is as old or older. */
  private markReady(lane: ClientLane): void {
    if (lane.ready) return;
    lane.ready = true;
    const list = this.readyLanes;
    let index = list.length;
    while (index > 0 && list[index - 1]!.lastTurn > lane.lastTurn) index--;
    list.splice(index, 0, lane);
  }

  /** Drops a lane with nothing held or waiting (a client that comes back starts a new one). */
  private forgetIfIdle(lane: ClientLane): void {
    if (lane.held > 0 || lane.waiting > 0) return;
    if (lane.ready) {
      lane.ready = false;
      this.readyLanes.splice(this.readyLanes.indexOf(lane), 1);
    }
    lane.queue.length = 0;
    this.lanes.delete(lane.key);
  }
}

/**
 * The fairness key of a client address (Express's `req.ip`): an IPv4 address as it is (also
 * when written as IPv4-mapped IPv6), an IPv6 address by its /64 prefix, the block a provider
 * gives one customer, so that one host cannot be many clients by changing its address. Any other
 * string as it is; undefined stays undefined (no key: not gated).
 */
export function clientKeyOfAddress(address: string | undefined): string | undefined {
  // Most addresses are IPv4: as they are, without parsing.
  if (address === undefined || !address.includes(':') || isIP(address) !== 6) return address;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return mapped[1];
  return `${expandIPv6(address)
    .slice(0, 4)
    .map((group) => Number.parseInt(group, 16).toString(16))
    .join(':')}::/64`;
}

/** The groups of an IPv6 address with `::` expanded to zeros, without its zone id. */
function expandIPv6(address: string): string[] {
  const [head, tail] = address.split('%')[0]!.toLowerCase().split('::') as [string, string | undefined];
  const left = head === '' ? [] : head.split(':');
  if (tail === undefined) return left;
  const right = tail === '' ? [] : tail.split(':');
  return [...left, ...Array<string>(Math.max(0, 8 - left.length - right.length)).fill('0'), ...right];
}
