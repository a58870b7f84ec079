import { randomBytes, randomInt } from 'node:crypto';
import type { Request, Response } from 'express';
import type { Knex } from 'knex';
import type { Identity } from '../auth/identity.js';
import { boundedKnex } from '../db/bound-statements.js';
import { readRow, type RecordStore } from '../db/record-store.js';
import { BadRequestError, RecordbaseError, UnavailableError } from '../errors.js';
import type { Logger } from '../http/logger.js';
import type { Limits, RealtimeSettings } from '../options.js';
import { compileRule, compileUserFilter, fenceFilter } from '../records/access-rules.js';
import { isSuperuser, type Caller } from '../records/caller.js';
import type { RecordPresenter } from '../records/present-records.js';
import type { CollectionSchema, SchemaRegistry } from '../schema/collection-schema.js';
import { ChangeReader, type Change } from './change-reader.js';
import { startChangeListener, type ChangeListener } from './change-listener.js';
import { ClientRegistry } from './client-registry.js';
import { matchConditions, type Conditions } from './match-subscribers.js';
import { CHANGES_CHANNEL, instanceChannel } from './outbox-schema.js';
import { MAX_SUBSCRIPTION_LENGTH, MAX_SUBSCRIPTIONS, parseSubscription, type Subscription } from './parse-subscription.js';
import { frameMessage, SseStream } from './sse-stream.js';

/** What the hub needs from the router. */
export interface RealtimeHubOptions {
  db: Knex;
  /** The records' store: the presenter reads expansions through it. */
  store: RecordStore;
  registry: SchemaRegistry;
  presenter: RecordPresenter;
  settings: RealtimeSettings;
  limits: Pick<Limits, 'statementTimeoutMs' | 'acquireTimeoutMs'>;
  logger: Logger;
}

/** How often the outbox is read even without a notification (a notification lost with a connection). */
const SAFETY_POLL_MS = 2_000;
/** How long a POST waits for the instance that holds its stream to apply the subscriptions. */
const FORWARD_TIMEOUT_MS = 3_000;
/** An instance is taken for gone after this many missed heartbeats. */
const STALE_HEARTBEATS = 3;

const CLIENT_ID_ALPHABET = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';

/** 40 random `[A-Za-z0-9]`, as PocketBase's client ids. */
export function newClientId(): string {
  let id = '';
  for (let i = 0; i < 40; i++) id += CLIENT_ID_ALPHABET[randomInt(CLIENT_ID_ALPHABET.length)];
  return id;
}

/** Date macros (`@now`, `@todayStart`, ...) make a compiled condition depend on the time it was compiled. */
function dependsOnTime(text: string | null | undefined): boolean {
  return text !== null && text !== undefined && /@(?!request\.|collection\.)/.test(text);
}

interface LocalClient {
  readonly id: string;
  stream?: SseStream;
  identity: Identity | null;
  subscriptions: LocalSubscription[];
}

interface LocalSubscription {
  readonly client: LocalClient;
  readonly sub: Subscription;
  readonly collection: CollectionSchema;
  readonly caller: Caller;
  /**
   * Subscriptions of one group receive the same presented record: without expand, the caller kind
   * and the shape; with expand (read through the related view rules), also the identity and query.
   */
  readonly shapeGroup: string;
  /** Compiled once per subscription unless the rule or filter reads the clock. */
  conditions?: Conditions;
  /** Set when its condition failed on a row: it stays 'denied'. */
  broken?: boolean;
  readonly cacheable: boolean;
}

/** Messages between instances on their own channels. */
type InstanceMessage = { t: 'sync'; c: string; a: string; r: string } | { t: 'ack'; a: string };

/**
 * Realtime on one instance (DESIGN 12, docs/realtime.md): holds this instance's streams and their
 * subscriptions, reads committed changes from the outbox when notified, checks rules for every
 * local subscriber in batched statements, shapes each record once per shape and writes the
 * messages. The registry in Postgres lets a POST reach any instance.
 */
export class RealtimeHub {
  private readonly clients = new Map<string, LocalClient>();
  private readonly byCollection = new Map<CollectionSchema, Set<LocalSubscription>>();
  private readonly byTable: Map<string, CollectionSchema>;
  /** The database, every statement of realtime's own bounded by the limits: its work outlives the requests that start it. */
  private readonly db: Knex;
  /** The records' store, bounded as `db`. */
  private readonly store: RecordStore;
  private readonly reader: ChangeReader;
  private readonly clientRegistry: ClientRegistry;
  private readonly pendingAcks = new Map<string, () => void>();
  private listener: ChangeListener | undefined;
  private timers: NodeJS.Timeout[] = [];
  private reading = false;
  private readAgain = false;
  private retryTimer: NodeJS.Timeout | undefined;
  private closing = false;
  /** Streams being opened: counted against maxClients before their registry row exists. */
  private opening = 0;

  private constructor(private readonly options: RealtimeHubOptions) {
    this.byTable = new Map(options.registry.collections.map((c) => [c.table, c]));
    const { statementTimeoutMs, acquireTimeoutMs } = options.limits;
    const bounds = { statementTimeoutMs, acquireTimeoutMs };
    this.db = boundedKnex(options.db, bounds);
    this.store = options.store.within(bounds);
    this.reader = new ChangeReader(this.db);
    this.clientRegistry = new ClientRegistry(this.db, randomBytes(8).toString('hex'));
  }

  /** Starts reading changes from now on, listening, and the heartbeat. */
  static async start(options: RealtimeHubOptions): Promise<RealtimeHub> {
    const hub = new RealtimeHub(options);
    await hub.reader.start();
    await hub.clientRegistry.heartbeat(STALE_HEARTBEATS * options.settings.instanceHeartbeatMs);
    hub.listener = await startChangeListener({
      db: options.db,
      channels: [CHANGES_CHANNEL, instanceChannel(hub.clientRegistry.instanceId)],
      logger: options.logger,
      events: {
        onNotification: (channel, payload) => hub.onNotification(channel, payload),
        onConnected: () => hub.requestRead(),
      },
    });
    const every = (ms: number, work: () => Promise<unknown>) => {
      const timer = setInterval(() => void work().catch((err: unknown) => hub.report('realtime: background work failed', err)), ms);
      timer.unref();
      hub.timers.push(timer);
    };
    every(SAFETY_POLL_MS, async () => hub.requestRead());
    every(options.settings.heartbeatMs, async () => {
      for (const client of hub.clients.values()) client.stream?.heartbeat();
    });
    every(options.settings.instanceHeartbeatMs, () => hub.beat());
    return hub;
  }

  /** This instance's id in the registry (its channel is `recordbase_i_<id>`). */
  get instanceId(): string {
    return this.clientRegistry.instanceId;
  }

  /** `GET /api/realtime`: registers the client, then opens its stream with PB_CONNECT. */
  async connect(req: Request, res: Response): Promise<void> {
    if (this.closing) throw new UnavailableError('The server is shutting down.');
    if (this.clients.size + this.opening >= this.options.settings.maxClients) throw new UnavailableError(undefined, 'realtime_too_many_clients');
    const client: LocalClient = { id: newClientId(), identity: null, subscriptions: [] };
    this.opening++;
    try {
      await this.clientRegistry.addClient(client.id);
    } finally {
      this.opening--;
    }
    if (this.closing || req.socket.destroyed) {
      void this.clientRegistry.removeClient(client.id).catch((err: unknown) => this.report('realtime: could not remove a client', err));
      if (!res.headersSent) res.end();
      return;
    }
    this.clients.set(client.id, client);
    client.stream = new SseStream(client.id, res, {
      maxBufferBytes: this.options.settings.maxClientBufferBytes,
      onClose: () => this.forget(client),
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
      const sub = parseSubscription(raw, this.options.registry);
      if (sub.collection && sub.filter !== undefined) {
        try {
          compileUserFilter({ registry: this.options.registry, collection: sub.collection, filter: sub.filter, caller: callerOf(identity, sub) });
        } catch (err) {
          if (err instanceof RecordbaseError && err.status === 400) {
            throw new BadRequestError(`Invalid subscription ${JSON.stringify(raw.slice(0, 200))}: ${err.message}`, 'invalid_subscription', err);
          }
          throw err;
        }
      }
      parsed.push(sub);
    }
    const owner = await this.clientRegistry.setSubscriptions(clientId, identity, raws);
    if (owner === this.instanceId) {
      this.apply(clientId, identity, parsed);
      return;
    }
    await this.forward(owner, clientId);
  }

  /** Ends every stream, stops listening and removes this instance from the registry. */
  async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    for (const timer of this.timers) clearInterval(timer);
    if (this.retryTimer) clearTimeout(this.retryTimer);
    await this.listener?.close();
    for (const client of [...this.clients.values()]) client.stream?.end();
    for (const settle of this.pendingAcks.values()) settle();
    await this.clientRegistry.removeInstance().catch((err: unknown) => this.report('realtime: could not remove this instance from the registry', err));
    // A read in progress finishes its change; later ones find no clients.
    while (this.reading) await new Promise((resolve) => setTimeout(resolve, 10));
  }

  private forget(client: LocalClient): void {
    if (this.clients.get(client.id) !== client) return;
    this.clients.delete(client.id);
    this.unindex(client);
    if (this.closing) return;
    void this.clientRegistry.removeClient(client.id).catch((err: unknown) => this.report('realtime: could not remove a closed client', err));
  }

  private apply(clientId: string, identity: Identity | null, subs: readonly Subscription[]): void {
    const client = this.clients.get(clientId);
    if (!client) return;
    this.unindex(client);
    client.identity = identity;
    client.subscriptions = [];
    for (const sub of subs) {
      if (!sub.collection) continue;
      const rule = sub.collection.rules[sub.recordId === undefined ? 'list' : 'view'];
      const caller = callerOf(identity, sub);
      const local: LocalSubscription = {
        client,
        sub,
        collection: sub.collection,
        caller,
        shapeGroup: sub.shape.tree.size === 0 ? `${isSuperuser(caller)}|${sub.shapeKey}` : JSON.stringify([identity, sub.query, sub.shapeKey]),
        cacheable: !dependsOnTime(rule) && !dependsOnTime(sub.filter),
      };
      client.subscriptions.push(local);
      let set = this.byCollection.get(sub.collection);
      if (!set) this.byCollection.set(sub.collection, (set = new Set()));
      set.add(local);
    }
  }

  private unindex(client: LocalClient): void {
    for (const local of client.subscriptions) this.byCollection.get(local.collection)?.delete(local);
  }

  private async forward(owner: string, clientId: string): Promise<void> {
    const token = randomBytes(12).toString('hex');
    let timer: NodeJS.Timeout | undefined;
    const acked = new Promise<boolean>((resolve) => {
      this.pendingAcks.set(token, () => resolve(true));
      timer = setTimeout(() => resolve(false), FORWARD_TIMEOUT_MS);
    });
    try {
      const message: InstanceMessage = { t: 'sync', c: clientId, a: token, r: this.instanceId };
      await this.clientRegistry.notify(instanceChannel(owner), JSON.stringify(message));
      if (!(await acked)) throw new UnavailableError(undefined, 'realtime_unavailable');
    } finally {
      clearTimeout(timer);
      this.pendingAcks.delete(token);
    }
  }

  private onNotification(channel: string, payload: string): void {
    if (this.closing) return;
    if (channel === CHANGES_CHANNEL) {
      this.requestRead();
      return;
    }
    let message: InstanceMessage;
    try {
      message = JSON.parse(payload) as InstanceMessage;
    } catch {
      return;
    }
    if (message.t === 'ack') {
      this.pendingAcks.get(message.a)?.();
      return;
    }
    if (message.t === 'sync' && typeof message.c === 'string' && typeof message.r === 'string') {
      void (async () => {
        const row = await this.clientRegistry.loadClient(message.c);
        if (row) {
          const subs: Subscription[] = [];
          for (const raw of row.subscriptions) {
            try {
              subs.push(parseSubscription(raw, this.options.registry));
            } catch {
              // Checked by the instance that took the POST; a subscription it accepted and this one cannot read receives nothing.
            }
          }
          this.apply(message.c, row.identity, subs);
        }
        const ack: InstanceMessage = { t: 'ack', a: message.a };
        await this.clientRegistry.notify(instanceChannel(message.r), JSON.stringify(ack));
      })().catch((err: unknown) => this.report('realtime: could not apply forwarded subscriptions', err));
    }
  }

  /** Reads the outbox now, or once more after the read in progress. */
  private requestRead(): void {
    if (this.closing) return;
    if (this.reading) {
      this.readAgain = true;
      return;
    }
    this.reading = true;
    void (async () => {
      try {
        do {
          this.readAgain = false;
          await this.reader.readNew(
            (changes) => this.deliverPage(changes),
            () => [...this.byCollection].flatMap(([collection, subs]) => (subs.size > 0 ? [collection.table] : [])),
          );
        } while (this.readAgain && !this.closing);
      } finally {
        this.reading = false;
      }
    })().catch((err: unknown) => {
      this.report('realtime: reading changes failed; retrying', err);
      this.retryTimer ??= setTimeout(() => {
        this.retryTimer = undefined;
        this.requestRead();
      }, 1_000);
      this.retryTimer.unref();
    });
  }

  private async beat(): Promise<void> {
    const { instanceHeartbeatMs, outboxRetentionMs } = this.options.settings;
    const remade = await this.clientRegistry.heartbeat(STALE_HEARTBEATS * instanceHeartbeatMs);
    if (remade) {
      // Another instance took this one for gone (it was silent too long) and removed its clients: register the open ones again.
      for (const client of this.clients.values()) {
        await this.clientRegistry.addClient(client.id, { identity: client.identity, subscriptions: client.subscriptions.map((s) => s.sub.raw) });
      }
    }
    await this.clientRegistry.pruneOutbox(outboxRetentionMs);
  }

  /**
   * One page of changes (in order) to every local subscription they reach, each client written
   * once for the whole page: under load the cost per stream is per read, not per change. Frames
   * are written only after the whole page is prepared, so a page that fails (and is read again)
   * has written nothing.
   */
  private async deliverPage(changes: readonly Change[]): Promise<void> {
    const frames = new Map<LocalClient, string>();
    for (const change of changes) await this.deliver(change, frames);
    for (const [client, text] of frames) client.stream?.write(text);
  }

  /** One change's frames for every local subscription it reaches, appended to `frames`: rules in batched statements, the record shaped once per shape. */
  private async deliver(change: Change, frames: Map<LocalClient, string>): Promise<void> {
    const collection = this.byTable.get(change.collection);
    const subscribed = collection && this.byCollection.get(collection);
    if (!collection || !subscribed || subscribed.size === 0) return;
    const candidates = [...subscribed].filter((local) => local.sub.recordId === undefined || local.sub.recordId === change.recordId);
    if (candidates.length === 0) return;
    const { holds, failed } = await matchConditions(
      this.db,
      collection,
      change.row,
      candidates.map((local) => this.conditionsOf(local)),
    );
    candidates.forEach((local, i) => {
      if (!failed[i]) return;
      // Its rule or filter fails (or runs past the statement timeout) on a real row: it receives
      // nothing more, so that it costs its failure once, not on every change.
      local.conditions = 'denied';
      local.broken = true;
      this.report(`realtime: the subscription "${local.sub.raw.slice(0, 200)}" of client ${local.client.id} fails its rule check and receives nothing more`, 'its condition failed');
    });
    const groups = new Map<string, LocalSubscription[]>();
    candidates.forEach((local, i) => {
      if (!holds[i] || !local.client.stream?.isOpen) return;
      const group = groups.get(local.shapeGroup);
      if (group) group.push(local);
      else groups.set(local.shapeGroup, [local]);
    });
    if (groups.size === 0) return;
    const values = readRow(collection, change.row);
    for (const members of groups.values()) {
      const first = members[0];
      let data: string;
      try {
        const [record] = await this.options.presenter.present({ collection, records: [values], caller: first.caller, shape: first.sub.shape, store: this.store });
        data = JSON.stringify({ action: change.action, record });
      } catch (err) {
        this.report(`realtime: a ${change.action} of ${collection.name} could not be shaped for "${first.sub.raw.slice(0, 200)}"`, err);
        continue;
      }
      for (const local of members) frames.set(local.client, (frames.get(local.client) ?? '') + frameMessage(local.client.id, local.sub.raw, data));
    }
  }

  private conditionsOf(local: LocalSubscription): Conditions {
    if (local.conditions !== undefined && (local.cacheable || local.broken)) return local.conditions;
    const { registry } = this.options;
    let conditions: Conditions;
    try {
      const rule = compileRule({ registry, collection: local.collection, action: local.sub.recordId === undefined ? 'list' : 'view', caller: local.caller });
      const filter = compileUserFilter({ registry, collection: local.collection, filter: local.sub.filter, caller: local.caller });
      conditions = fenceFilter(rule, filter);
    } catch {
      // A `null` rule for a non-superuser (403), or a filter this identity may not use: nothing reaches it.
      conditions = 'denied';
    }
    local.conditions = conditions;
    return conditions;
  }

  private report(message: string, err: unknown): void {
    if (this.closing) return;
    this.options.logger.warn(`${message}: ${err instanceof Error ? err.message : String(err)}`);
  }
}

/** Who a subscription's rules are checked for: the client's identity, `@request.query.*` from its options, method GET. */
function callerOf(identity: Identity | null, sub: Subscription): Caller {
  return { request: { auth: identity, query: sub.query, body: {}, method: 'GET' } };
}
