import { randomBytes, randomInt } from 'node:crypto';
import type { Request, Response } from 'express';
import type { Knex } from 'knex';
import type { Identity } from '../auth/identity.js';
import type { DatabaseContext } from '../db/statements/database-context.js';
import { clientKeyOfAddress } from '../db/statements/fair-gate.js';
import { startNotificationListener, type ListenConnection, type NotificationListener } from '../db/realtime/notification-listener.js';
import type { RecordStore } from '../db/record-store.js';
import { CHANGES_CHANNEL, instanceChannel } from '../db/shared-names.js';
import { StatementRunner } from '../db/statements/statement-runner.js';
import { BadRequestError, UnavailableError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { RecordPresenter } from '../records/present-records.js';
import type { CollectionSchema, SchemaRegistry } from '../schema/collection-schema.js';
import { ChangeReader } from './change-reader.js';
import { OutboxReads } from './outbox-reads.js';
import { ClientRegistry } from './client-registry.js';
import { ChangeDelivery, deliveryOf } from './deliver-changes.js';
import { IdleMode } from './idle-mode.js';
import { InstanceMessages } from './instance-messages.js';
import type { LocalClient, LocalSubscription } from './local-client.js';
import { MAX_SUBSCRIPTION_LENGTH, MAX_SUBSCRIPTIONS, parseSubscription, topicKey, type Subscription } from './parse-subscription.js';
import { SseStream } from './sse-stream.js';
import { StreamSlots } from './stream-slots.js';
import { prepareSubscriptions, type PreparedSubscription } from './subscription-conditions.js';
import { runDetached } from '../telemetry/start-span.js';

/** The realtime settings: the router's `realtime` option resolved (docs/realtime.md, docs/configuration.md). */
export interface RealtimeSettings {
  /** Milliseconds between the `:` comment lines that keep idle streams open through proxies. Default 25,000. */
  heartbeatMs: number;
  /** Streams one instance holds at most; one more is a 503 `realtime_too_many_clients`. Default 10,000. */
  maxClients: number;
  /**
   * Streams one client address (`req.ip`: behind a proxy, set Express's `trust proxy`) may hold on
   * one instance; one more is a 429 `realtime_too_many_clients_per_address`. Default 100.
   */
  maxClientsPerAddress: number;
  /** Clients one identity may subscribe with, across instances; one more is a 429 `realtime_too_many_clients_per_identity`. Default 50. */
  maxClientsPerIdentity: number;
  /** Milliseconds between an instance's heartbeats in the registry; silent for 3x this, it counts as gone with its clients. Default 5,000. */
  instanceHeartbeatMs: number;
  /** How long a change stays in the outbox table before it is pruned, in milliseconds. Default 10 minutes. */
  outboxRetentionMs: number;
  /** Bytes a client's stream may have waiting to be sent; a client further behind is dropped. Default 4 MiB. */
  maxClientBufferBytes: number;
  /**
   * Longest one check of a change against subscriptions may run, in milliseconds (its statements
   * are cancelled past it); a client whose checks fail 3 times in a row has its stream ended.
   * Default 500, or `limits.statementTimeoutMs` when that is lower (the embedded engine on disk):
   * far below a request's own bound, since it runs for every change.
   */
  checkTimeoutMs: number;
  /**
   * Whether a subscription's `options.headers` are `@request.headers.*` in its rules, as in
   * PocketBase. The client writes them, so a header a proxy or the host sets over HTTP is the
   * client's choice on realtime; `false` gives subscriptions no headers, and header rules there
   * read every header as absent. Default true.
   */
  subscriptionHeaders: boolean;
  /**
   * Where LISTEN runs: a connection string, node-postgres client settings, or a function making a
   * new `pg.Client`, to a direct or session-mode address. Absent: a connection made with the Knex's
   * own settings, which a pooler in transaction mode cannot keep listening (docs/realtime.md).
   */
  listen?: ListenConnection;
  /** How long the start-up check waits for its NOTIFY to come back on the LISTEN connection before `ready` rejects. Default 2,000. */
  listenCheckMs: number;
  /**
   * Idle mode: milliseconds an instance holding no stream (and answering no realtime request)
   * stays awake before it stops every periodic statement and its LISTEN connection, so a
   * serverless Postgres can suspend; a stream or a POST wakes it. `false`: it never sleeps. Default 15,000.
   */
  idleAfterMs: number | false;
}

/** What the hub needs from the router. */
export interface RealtimeHubOptions {
  /** The pool: realtime's statements go through recordbase's own send path (StatementRunner), never this Knex's builder. */
  db: Knex;
  /** The records' store: the presenter reads expansions through it. */
  store: RecordStore;
  registry: SchemaRegistry;
  presenter: RecordPresenter;
  settings: RealtimeSettings;
  /** The bounds of realtime's own statements: the router's `limits` of the same names. */
  limits: Pick<DatabaseContext, 'statementTimeoutMs' | 'acquireTimeoutMs'>;
  logger: Logger;
}

/** How often the outbox is read even without a notification (a notification lost with a connection). */
const SAFETY_POLL_MS = 2_000;
/** An instance is taken for gone after this many missed heartbeats (and its row stops keeping capture on). */
const STALE_HEARTBEATS = 3;
/** While no client of any instance subscribes, outbox rows are kept this long (not outboxRetentionMs). */
const IDLE_OUTBOX_RETENTION_MS = 30_000;

const CLIENT_ID_ALPHABET = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';

/** 40 random `[A-Za-z0-9]`, as PocketBase's client ids. */
export function newClientId(): string {
  let id = '';
  for (let i = 0; i < 40; i++) id += CLIENT_ID_ALPHABET[randomInt(CLIENT_ID_ALPHABET.length)];
  return id;
}

/**
 * Realtime on one instance (docs/realtime.md): holds this instance's streams and their
 * subscriptions, reads committed changes from the outbox when notified and hands them to
 * delivery (deliver-changes.ts), which checks the rules and writes the messages. The registry in
 * Postgres lets a POST reach any instance (instance-messages.ts). Holding no stream, it sleeps
 * (idle-mode.ts): no periodic statement until a stream or a POST wakes it.
 */
export class RealtimeHub {
  private readonly clients = new Map<string, LocalClient>();
  /** Every applied subscription per collection (an array, read on every change; rebuilt when subscriptions change). */
  private readonly byCollection = new Map<CollectionSchema, LocalSubscription[]>();
  private readonly byTable: Map<string, CollectionSchema>;
  /** Where realtime's own statements go, each bounded by the limits: its work outlives the requests that start it. */
  private readonly runner: StatementRunner;
  /** The records' store, bounded as `runner`. */
  private readonly store: RecordStore;
  private readonly reads: OutboxReads;
  private readonly delivery: ChangeDelivery;
  private readonly clientRegistry: ClientRegistry;
  private readonly messages: InstanceMessages;
  private readonly idle: IdleMode;
  /** Streams per client address (maxClientsPerAddress). */
  private readonly streamSlots: StreamSlots;
  private listener: NotificationListener | undefined;
  private timers: NodeJS.Timeout[] = [];
  private closing = false;
  /** Streams being opened: counted against maxClients before their registry row exists. */
  private opening = 0;

  private constructor(private readonly options: RealtimeHubOptions) {
    this.byTable = new Map(options.registry.collections.map((c) => [c.table, c]));
    const { statementTimeoutMs, acquireTimeoutMs } = options.limits;
    const bounds = { statementTimeoutMs, acquireTimeoutMs };
    this.runner = new StatementRunner(options.db, bounds);
    this.store = options.store.within(bounds);
    this.reads = new OutboxReads({
      reader: new ChangeReader(this.runner),
      deliver: (changes) => this.delivery.deliverPage(changes, (collection) => this.byCollection.get(collection) ?? []),
      wanted: () => [...this.byCollection.keys()].map((collection) => collection.table),
      report: (message, err) => this.report(message, err),
    });
    this.delivery = new ChangeDelivery({
      runner: this.runner,
      store: options.store,
      presenter: options.presenter,
      collectionOf: (table) => this.byTable.get(table),
      bounds: { checkTimeoutMs: options.settings.checkTimeoutMs, acquireTimeoutMs },
      endClient: (client, reason) => this.endClient(client, reason),
      logger: options.logger,
    });
    this.clientRegistry = new ClientRegistry(this.runner, randomBytes(8).toString('hex'), { maxClientsPerIdentity: options.settings.maxClientsPerIdentity });
    this.streamSlots = new StreamSlots(options.settings.maxClientsPerAddress);
    const report = (message: string, err: unknown) => this.report(message, err);
    this.messages = new InstanceMessages({ registry: this.clientRegistry, apply: (clientId, identity, raws) => this.applyForwarded(clientId, identity, raws), report });
    this.idle = new IdleMode({ idleAfterMs: options.settings.idleAfterMs, sleep: () => this.sleep(), wake: () => runDetached(() => this.wake()), report });
  }

  /**
   * Registers this instance (which turns capture on, if no other realtime instance had it on),
   * then starts reading changes from now on, listening (checked), and the heartbeat; holding no
   * stream, it sleeps after `idleAfterMs`.
   */
  static async start(options: RealtimeHubOptions): Promise<RealtimeHub> {
    const hub = new RealtimeHub(options);
    try {
      await hub.open();
    } catch (error) {
      await hub.close();
      throw error;
    }
    return hub;
  }

  private async open(): Promise<void> {
    await this.register();
    this.listener = await this.listen();
    await this.checkNotificationsReturn(this.listener);
    this.startTimers();
    this.idle.start();
  }

  /**
   * Makes this instance's registry row live (which turns capture on, if no other realtime instance
   * had it on, and then waits for the writes that missed it) and starts reading the outbox at the
   * present: at start, and at each wake from idle mode (it owes nothing to clients not connected).
   */
  private async register(): Promise<void> {
    const { captureWasOn } = await this.clientRegistry.heartbeat(STALE_HEARTBEATS * this.options.settings.instanceHeartbeatMs);
    if (!captureWasOn) await this.waitForUncapturedWrites('realtime capture was switched on');
    await this.reads.start();
  }

  private async listen(): Promise<NotificationListener> {
    const { options } = this;
    return startNotificationListener({
      db: options.db,
      ...(options.settings.listen === undefined ? {} : { connection: options.settings.listen }),
      channels: [CHANGES_CHANNEL, instanceChannel(this.clientRegistry.instanceId)],
      logger: options.logger,
      events: {
        onNotification: (channel, payload) => this.onNotification(channel, payload),
        onConnected: () => this.reads.request(),
      },
    });
  }

  private startTimers(): void {
    const every = (ms: number, work: () => Promise<unknown>) => {
      const timer = setInterval(() => void work().catch((err: unknown) => this.report('realtime: background work failed', err)), ms);
      timer.unref();
      this.timers.push(timer);
    };
    every(SAFETY_POLL_MS, async () => this.reads.request());
    every(this.options.settings.heartbeatMs, async () => {
      for (const client of this.clients.values()) client.stream?.heartbeat();
    });
    every(this.options.settings.instanceHeartbeatMs, () => this.beat());
  }

  private stopTimers(): void {
    for (const timer of this.timers.splice(0)) clearInterval(timer);
    this.reads.stop();
  }

  /** Idle mode's sleep (idle-mode.ts): no heartbeat, outbox read or prune, and no LISTEN connection; the registry row expires. */
  private async sleep(): Promise<void> {
    this.stopTimers();
    const listener = this.listener;
    this.listener = undefined;
    await listener?.close();
  }

  /** Idle mode's wake, before a stream or a POST is answered: as at start, without the start-up check (its setting was checked then). */
  private async wake(): Promise<void> {
    await this.register();
    try {
      this.listener = await this.listen();
    } catch (error) {
      this.reads.stop();
      throw error;
    }
    this.startTimers();
  }

  /**
   * The start-up check (DESIGN 21): a NOTIFY on this instance's own channel, sent through the
   * send path every other statement takes, must come back on the LISTEN connection within
   * `listenCheckMs`. Behind a pooler in transaction mode LISTEN holds no server session, so
   * notifications never arrive: realtime would deliver only at the outbox's safety read and
   * forwarded POSTs would answer 503. That must stop the start, with the fix, never pass silently.
   */
  private async checkNotificationsReturn(listener: NotificationListener): Promise<void> {
    const waitMs = this.options.settings.listenCheckMs;
    if (await this.messages.sendToSelf(waitMs)) return;
    throw new Error(
      `realtime: notifications do not come back through ${listener.where} (a NOTIFY sent at start was not heard on the LISTEN connection within ${waitMs} ms, realtime.listenCheckMs): ` +
        'a pooler in transaction mode? Set realtime.listen to a direct or session-mode URL, see docs/realtime.md',
    );
  }

  /** Streams open on this instance (the `recordbase.realtime.streams` gauge). */
  get streamCount(): number {
    return this.clients.size;
  }

  /** Outbox rows this instance has not read yet (the `recordbase.realtime.outbox.depth` gauge); undefined while it sleeps. */
  countUnreadChanges(): Promise<number | undefined> {
    return this.reads.countUnread();
  }

  /** This instance's id in the registry (its channel is `recordbase_i_<id>`). */
  get instanceId(): string {
    return this.clientRegistry.instanceId;
  }

  /** `GET /api/realtime`: registers the client, then opens its stream with PB_CONNECT. */
  async connect(req: Request, res: Response): Promise<void> {
    if (this.closing) throw new UnavailableError('The server is shutting down.');
    if (this.clients.size + this.opening >= this.options.settings.maxClients) throw new UnavailableError(undefined, 'realtime_too_many_clients');
    // Express's req.ip honours the host's `trust proxy`: behind a proxy, the client's address. An
    // IPv6 client counts by its /64, as for the pool's fairness (one host commonly has a whole /64).
    const address = clientKeyOfAddress(req.ip ?? req.socket.remoteAddress) ?? '';
    const releaseSlot = this.streamSlots.take(address);
    const client: LocalClient = { id: newClientId(), address, identity: null, subscriptions: [] };
    // The stream keeps the instance awake (idle mode) from before its registry row until it closes.
    let letSleep: (() => void) | undefined;
    const release = () => {
      releaseSlot();
      letSleep?.();
    };
    this.opening++;
    try {
      letSleep = await this.idle.hold();
      await this.clientRegistry.addClient(client.id);
    } catch (err) {
      release();
      throw err;
    } finally {
      this.opening--;
    }
    if (this.closing || req.socket.destroyed) {
      release();
      void this.clientRegistry.removeClient(client.id).catch((err: unknown) => this.report('realtime: could not remove a client', err));
      if (!res.headersSent) res.end();
      return;
    }
    this.clients.set(client.id, client);
    client.stream = new SseStream(client.id, res, {
      maxBufferBytes: this.options.settings.maxClientBufferBytes,
      onClose: () => {
        release();
        this.forget(client);
      },
    });
  }

  /**
   * `POST /api/realtime`: checks the subscriptions (400s), stores them with the identity in the
   * registry (404 unknown client, 403 another identity), and returns once the instance holding
   * the stream applies them: here at once, elsewhere when it acknowledges (503 after 3 s).
   */
  async setSubscriptions(clientId: string, identity: Identity | null, raws: readonly string[]): Promise<void> {
    if (raws.length > MAX_SUBSCRIPTIONS) throw new BadRequestError(`At most ${MAX_SUBSCRIPTIONS} subscriptions, got ${raws.length}.`, 'invalid_subscription');
    const parsed: Subscription[] = [];
    for (const raw of raws) {
      if (typeof raw !== 'string') throw new BadRequestError('Every subscription must be a string.', 'invalid_subscription');
      if (raw.length > MAX_SUBSCRIPTION_LENGTH) throw new BadRequestError(`A subscription may be at most ${MAX_SUBSCRIPTION_LENGTH} characters long.`, 'invalid_subscription');
      parsed.push(this.parse(raw));
    }
    // Identical subscriptions are one (as PocketBase's set of them), in the registry too.
    const distinct = [...new Set(raws)];
    const prepared = await prepareSubscriptions({ registry: this.options.registry, identity, subscriptions: parsed });
    const needs = {
      watched: parsed.filter((s) => s.collection !== undefined && s.collection.type !== 'view').map((s) => topicKey(s.raw)),
      readsOtherTables: prepared.some((p) => !p.conditions.rowLocal),
    };
    // Awake (idle mode) before it answers: it hears the ack of a forward on its LISTEN connection.
    const letSleep = await this.idle.hold();
    try {
      const { owner, switchedCaptureOn } = await this.clientRegistry.setSubscriptions(clientId, identity, distinct, needs);
      if (switchedCaptureOn) await this.waitForUncapturedWrites('a subscription switched capture on for its collection');
      if (owner === this.instanceId) {
        this.applyPrepared(clientId, identity, prepared);
        return;
      }
      await this.messages.forward(owner, clientId, identity);
    } finally {
      letSleep();
    }
  }

  /**
   * A write whose capture trigger looked before capture was switched on (`why`) captured nothing;
   * once a subscription answers 204, no such write may still commit. So waits for every
   * transaction running now to end, bounded by the statement timeout: one that never ends must not
   * stop a start or a POST for longer.
   */
  private async waitForUncapturedWrites(why: string): Promise<void> {
    const { statementTimeoutMs } = this.options.limits;
    if (await this.clientRegistry.waitForRunningTransactions(statementTimeoutMs)) return;
    this.options.logger.warn(
      `realtime: transactions that began before ${why} are still running after ${statementTimeoutMs} ms (limits.statementTimeoutMs); changes they made are not delivered`,
    );
  }

  /**
   * One subscription string as this instance's rules read it: with `realtime.subscriptionHeaders`
   * off, without its `options.headers` (still checked, so a malformed one is the same 400), so
   * that a header rule, which over HTTP reads what a proxy or the host set, fails closed here.
   */
  private parse(raw: string): Subscription {
    const sub = parseSubscription(raw, this.options.registry);
    return this.options.settings.subscriptionHeaders ? sub : { ...sub, headers: Object.create(null) as Record<string, string> };
  }

  /** Ends every stream, stops listening and removes this instance from the registry. */
  async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    await this.idle.close();
    this.stopTimers();
    await this.listener?.close();
    for (const client of [...this.clients.values()]) client.stream?.end();
    await this.delivery.close();
    this.messages.close();
    await this.clientRegistry.removeInstance().catch((err: unknown) => this.report('realtime: could not remove this instance from the registry', err));
    // A read in progress finishes its page; later ones find no clients.
    await this.reads.close();
  }

  private forget(client: LocalClient): void {
    if (this.clients.get(client.id) !== client) return;
    this.clients.delete(client.id);
    this.unindex(client);
    if (this.closing) return;
    void this.clientRegistry.removeClient(client.id).catch((err: unknown) => this.report('realtime: could not remove a closed client', err));
  }

  /** A forwarded POST's subscriptions (instance-messages.ts), as the registry holds them, compiled here and applied. */
  private async applyForwarded(clientId: string, identity: Identity | null, raws: readonly string[]): Promise<void> {
    const subs: Subscription[] = [];
    for (const raw of raws) {
      try {
        subs.push(this.parse(raw));
      } catch {
        // Checked by the instance that took the POST; a subscription it accepted and this one cannot read receives nothing.
      }
    }
    const prepared = await prepareSubscriptions({ registry: this.options.registry, identity, subscriptions: subs });
    this.applyPrepared(clientId, identity, prepared);
  }

  private applyPrepared(clientId: string, identity: Identity | null, prepared: readonly PreparedSubscription[]): void {
    const client = this.clients.get(clientId);
    if (!client) return;
    this.unindex(client);
    client.identity = identity;
    client.subscriptions = prepared.map((p) => ({ ...p, client, active: true }));
    // A client with one costly subscription has all its checks made in its own lane, in order.
    if (client.subscriptions.some((s) => !s.shared)) deliveryOf(client).isolated = true;
    for (const local of client.subscriptions) {
      const list = this.byCollection.get(local.collection);
      if (list) list.push(local);
      else this.byCollection.set(local.collection, [local]);
    }
  }

  private unindex(client: LocalClient): void {
    const touched = new Set<CollectionSchema>();
    for (const local of client.subscriptions) {
      local.active = false;
      touched.add(local.collection);
    }
    for (const collection of touched) {
      const left = (this.byCollection.get(collection) ?? []).filter((s) => s.client !== client);
      if (left.length > 0) this.byCollection.set(collection, left);
      else this.byCollection.delete(collection);
    }
  }

  /** Ends a client's stream for `reason` (delivery gave up on it): the SDK reconnects and resubscribes. */
  private endClient(client: LocalClient, reason: string): void {
    this.options.logger.warn(`realtime: a client's stream is ended: ${reason}`);
    client.stream?.end();
  }

  private onNotification(channel: string, payload: string): void {
    if (this.closing) return;
    if (channel === CHANGES_CHANNEL) this.reads.request();
    else this.messages.receive(payload);
  }

  private async beat(): Promise<void> {
    const { instanceHeartbeatMs, outboxRetentionMs } = this.options.settings;
    const { remade, captureWasOn } = await this.clientRegistry.heartbeat(STALE_HEARTBEATS * instanceHeartbeatMs);
    if (!captureWasOn && this.clients.size > 0) {
      // Every instance's row had expired (this one stalled longer than 3 heartbeats, alone): the
      // changes written meanwhile were not captured. Its clients reconnect and resubscribe, as
      // after any lost stream, rather than wait silently for what will never come.
      this.options.logger.warn(`realtime: this instance missed its heartbeats and no other realtime instance was live; changes written meanwhile were not captured, so its ${this.clients.size} streams are ended`);
      for (const client of [...this.clients.values()]) client.stream?.end();
      return;
    }
    if (remade) {
      // Another instance took this one for gone (it was silent too long) and removed its clients,
      // and with their rows the capture of what only they subscribed to: streams with
      // subscriptions are ended (their clients reconnect and subscribe again, as after any lost
      // stream); the others are registered again.
      const subscribed = [...this.clients.values()].filter((client) => client.subscriptions.length > 0);
      if (subscribed.length > 0) {
        this.options.logger.warn(`realtime: this instance missed its heartbeats and was taken for gone; changes written meanwhile may not have been captured, so its ${subscribed.length} streams with subscriptions are ended`);
      }
      for (const client of subscribed) client.stream?.end();
      for (const client of this.clients.values()) {
        if (client.subscriptions.length === 0) await this.clientRegistry.addClient(client.id, client.identity);
      }
    }
    await this.clientRegistry.pruneOutbox({ retentionMs: outboxRetentionMs, idleRetentionMs: IDLE_OUTBOX_RETENTION_MS });
  }

  private report(message: string, err: unknown): void {
    if (this.closing) return;
    this.options.logger.warn(`${message}: ${err instanceof Error ? err.message : String(err)}`);
  }
}
