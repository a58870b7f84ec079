import type { Identity } from '../auth/identity.js';
import { instanceChannel } from '../db/shared-names.js';
import { UnavailableError } from '../errors.js';
import type { ClientRegistry } from './client-registry.js';
import { IdentityHandoffs, splitIdentity } from './identity-handoffs.js';
import { PendingAcks } from './pending-acks.js';

/** How long a POST waits for the instance that holds its stream to apply the subscriptions. */
const FORWARD_TIMEOUT_MS = 3_000;

/**
 * Messages between instances on their own channels. A `sync` (apply client `c`'s subscriptions,
 * then ack `a` to instance `r`) carries the POST's whole identity, which the registry does not
 * keep: part `i` of `n` (splitIdentity), one notification each, sent together. A `sync` of older
 * code has no parts: the identity is then the registry row's.
 */
type InstanceMessage = { t: 'sync'; c: string; a: string; r: string; i?: number; n?: number; d?: string } | { t: 'ack'; a: string };

/** What the messages need from the hub. */
export interface InstanceMessagesOptions {
  /** The registry: client rows, and NOTIFY on an instance's channel. */
  registry: ClientRegistry;
  /** Applies a forwarded client's subscriptions (as the registry holds them) with `identity`; a client this instance does not hold is ignored. */
  apply(clientId: string, identity: Identity | null, subscriptions: readonly string[]): Promise<void>;
  /** Reports a failure of background work (a forwarded sync that could not be applied). */
  report(message: string, err: unknown): void;
}

/**
 * The messages an instance sends and hears on its own channel (`recordbase_i_<id>`): a POST
 * forwarded to the instance holding its stream and that instance's ack, and the start-up check's
 * NOTIFY to itself (DESIGN 21).
 */
export class InstanceMessages {
  private readonly pendingAcks = new PendingAcks();
  /** Identities forwarded to this instance, until all their parts have arrived. */
  private readonly handoffs = new IdentityHandoffs(FORWARD_TIMEOUT_MS);
  private closed = false;

  constructor(private readonly options: InstanceMessagesOptions) {}

  /** Sends an ack to this instance's own channel; true when it was heard on the LISTEN connection within `waitMs`. */
  async sendToSelf(waitMs: number): Promise<boolean> {
    const ack = this.pendingAcks.expect(waitMs);
    try {
      const probe: InstanceMessage = { t: 'ack', a: ack.token };
      await this.options.registry.notify(instanceChannel(this.options.registry.instanceId), [JSON.stringify(probe)]);
      return await ack.arrived;
    } finally {
      ack.done();
    }
  }

  /**
   * Has the instance holding the stream (`owner`) apply the subscriptions the registry now holds,
   * with the POST's whole `identity` (in the notifications, never in a table), and waits for its
   * ack: 503 `realtime_unavailable` after 3 s.
   */
  async forward(owner: string, clientId: string, identity: Identity | null): Promise<void> {
    const { registry } = this.options;
    const ack = this.pendingAcks.expect(FORWARD_TIMEOUT_MS);
    try {
      const parts = splitIdentity(identity);
      const messages = parts.map((d, i): InstanceMessage => ({ t: 'sync', c: clientId, a: ack.token, r: registry.instanceId, i, n: parts.length, d }));
      await registry.notify(instanceChannel(owner), messages.map((m) => JSON.stringify(m)));
      if (!(await ack.arrived)) throw new UnavailableError(undefined, 'realtime_unavailable');
    } finally {
      ack.done();
    }
  }

  /** A notification heard on this instance's own channel. */
  receive(payload: string): void {
    if (this.closed) return;
    let message: InstanceMessage;
    try {
      message = JSON.parse(payload) as InstanceMessage;
    } catch {
      return;
    }
    if (message.t === 'ack') {
      this.pendingAcks.settle(message.a);
      return;
    }
    if (message.t === 'sync' && typeof message.c === 'string' && typeof message.r === 'string' && typeof message.a === 'string') {
      let forwarded: { identity: Identity | null } | undefined;
      if (message.n !== undefined) {
        forwarded = this.handoffs.add(message.a, message.i, message.n, message.d);
        // More parts to come (or a malformed hand-off, dropped: its POST answers 503).
        if (!forwarded) return;
      }
      void this.applySync(message, forwarded).catch((err: unknown) => this.options.report('realtime: could not apply forwarded subscriptions', err));
    }
  }

  private async applySync(message: { c: string; a: string; r: string }, forwarded: { identity: Identity | null } | undefined): Promise<void> {
    const { registry } = this.options;
    const row = await registry.loadClient(message.c);
    // The registry row holds the identity of the latest POST: a hand-off of another one is stale, and not applied.
    if (row && (forwarded === undefined || (forwarded.identity?.id ?? null) === (row.identity?.id ?? null))) {
      await this.options.apply(message.c, forwarded ? forwarded.identity : row.identity, row.subscriptions);
    }
    const ack: InstanceMessage = { t: 'ack', a: message.a };
    await registry.notify(instanceChannel(message.r), [JSON.stringify(ack)]);
  }

  /** Ends every wait (close()): each resolves as arrived, its caller finds the instance closing; hand-offs in progress are dropped. */
  close(): void {
    this.closed = true;
    this.pendingAcks.settleAll();
    this.handoffs.clear();
  }
}
