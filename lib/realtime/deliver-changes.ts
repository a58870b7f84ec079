import { checkDatabaseAnswers } from '../db/statements/check-database-answers.js';
import type { DatabaseContext } from '../db/statements/database-context.js';
import { readRow, type RecordStore } from '../db/record-store.js';
import { StatementRunner } from '../db/statements/statement-runner.js';
import type { Logger } from '../logger.js';
import { withVisibleFields } from '../records/field-visibility.js';
import type { RecordPresenter } from '../records/present-records.js';
import type { CollectionSchema } from '../schema/collection-schema.js';
import type { Change } from './change-reader.js';
import { checkRecords, type CheckOutcome, type CheckTarget } from './check-records.js';
import { FairLanes } from './fair-lanes.js';
import type { ClientDelivery, DeliveryItem, LocalClient, LocalSubscription } from './local-client.js';
import { memberConditions, type MemberConditions } from './member-conditions.js';
import { traceDelivery } from '../telemetry/trace-delivery.js';

/** What delivery needs from the hub. */
export interface ChangeDeliveryOptions {
  /**
   * Where delivery's statements go: each check on a runner of its own over this one's pool,
   * bounded by that check's context (checkTimeoutMs, and its client's share of the pool).
   */
  runner: StatementRunner;
  /** The records' store: presenting reads expansions through it. */
  store: RecordStore;
  presenter: RecordPresenter;
  /** The collection of a table, or undefined for a table no collection of this instance declares. */
  collectionOf(table: string): CollectionSchema | undefined;
  /** How long one check may run (`realtime.checkTimeoutMs`), and wait for a connection. */
  bounds: { checkTimeoutMs: number; acquireTimeoutMs: number };
  /** Ends a client's stream for `reason` (the hub logs it and forgets the client). */
  endClient(client: LocalClient, reason: string): void;
  logger: Logger;
}

/** Checks of one client that may fail in a row before its stream is ended (the SDK then reconnects and resubscribes). */
export const MAX_CHECK_FAILURES = 3;
/** Changes that may wait for one client's checks; a client further behind is dropped. */
export const MAX_PENDING_CHECKS = 500;
/** Lane checks running at once on an instance (each holds a pooled connection while it runs). */
const LANE_CONCURRENCY = 2;
/** Shapes presented for one change in the shared path, and their bytes; the subscriptions of further shapes are checked in their clients' lanes. */
const SHARED_SHAPES_PER_CHANGE = 100;
const SHARED_BYTES_PER_CHANGE = 16 * 1024 * 1024;
/** The fairness key of the shared checks (lib/db/statements/database-context.ts `client`): realtime takes its turns as one client. */
const SHARED_CHECKS_CLIENT = 'recordbase:realtime';

/** A client's delivery state, made on first use. */
export function deliveryOf(client: LocalClient): ClientDelivery {
  return (client.delivery ??= { items: [], isolated: false, failures: 0, checks: 0, checking: false });
}

/**
 * How a subscription is checked on a change. Conditions that read only the row are checked on the
 * row as the change wrote it: a consistent state by itself, so every version is sent as PocketBase
 * sends it. Conditions that read other tables (`post.private = false`) are checked on the record
 * as it is now, in the statement that reads it, because the other tables may have changed since
 * the write; a delete, whose record is gone, on the row as it went, and is `stale` when something
 * was committed after it (deliver only which record went, then).
 */
type CheckMode = 'as-written' | 'as-now';

function modeOf(sub: LocalSubscription): CheckMode {
  return sub.conditions.rowLocal ? 'as-written' : 'as-now';
}

function targetFor(change: Change, mode: CheckMode): CheckTarget {
  if (mode === 'as-now' && change.action !== 'delete') return { kind: 'current', recordId: change.recordId };
  return { kind: 'written', row: change.row, seq: change.seq, tx: change.tx, snapshot: change.snapshot };
}

/** What one check decided for one change in one mode: the outcome (or its failure), the change's target in it, each member's index and its conditions. */
interface ModeCheck {
  readonly outcome: CheckOutcome | 'failed';
  readonly target: number;
  readonly member: ReadonlyMap<LocalSubscription, number>;
  readonly conditions: MemberConditions;
}

/** Subscriptions whose change is presented once: the row they were checked on, which guarded fields show, and the subscriptions. */
interface MessageGroup {
  readonly row: Record<string, unknown>;
  readonly visible?: readonly boolean[];
  readonly members: LocalSubscription[];
}

/** A change's shared checks, per mode. */
type SharedCheck = Partial<Record<CheckMode, ModeCheck>>;

/**
 * Delivers committed changes to this instance's subscribers (docs/realtime.md, "How it works"). Two
 * paths, so that one subscriber's costly filter costs that subscriber only:
 * - shared: subscriptions with cheap conditions (prepareSubscriptions) and no `expand` are
 *   checked together, per page of changes and collection, in statements bounded by
 *   `checkTimeoutMs`; their messages are presented once per shape and written at once;
 * - lanes: every other client (and any client whose shared check could not be made) has its
 *   checks queued in order and run one at a time in its own turn (fair-lanes.ts: round robin by
 *   address), bounded by `checkTimeoutMs` and counted against its address's share of the pool.
 *   A check that fails costs the change it covers; MAX_CHECK_FAILURES in a row end the stream.
 * Created and updated records are checked and sent as they are now (read in the statement that
 * checks them), deletes as they went, so a subscriber never receives a version its rules did not
 * let it read. Each client's messages stay in commit order.
 */
export class ChangeDelivery {
  private readonly lanes: FairLanes<LocalClient>;
  private closed = false;

  constructor(private readonly options: ChangeDeliveryOptions) {
    this.lanes = new FairLanes({
      concurrency: LANE_CONCURRENCY,
      groupOf: (client) => client.address ?? '',
      run: (client) => this.takeTurn(client),
      onError: (_client, error) => this.report(`realtime: a delivery to a client failed`, error),
    });
  }

  /**
   * One page of changes (in order) to every local subscription they reach. Resolves once the
   * shared checks are made and their messages queued; lane checks go on in their own turns.
   * Throws only when the database does not answer (the page is then read again).
   */
  async deliverPage(changes: readonly Change[], subscribersOf: (collection: CollectionSchema) => readonly LocalSubscription[]): Promise<void> {
    if (this.closed) return;
    const now = new Date();
    const shared = await this.checkShared(changes, subscribersOf, now);
    const items = new Map<LocalClient, DeliveryItem[]>();
    for (const [index, change] of changes.entries()) {
      const collection = this.options.collectionOf(change.collection);
      if (!collection) continue;
      const subscriptions = subscribersOf(collection);
      // Its span, linked to the write's, and its commit-to-delivery latency (docs/observability.md).
      const delivered = subscriptions.length === 0 ? undefined : traceDelivery(change, collection.name);
      await this.collectItems({ change, collection, subscriptions, shared: shared.get(index), now, items }).finally(delivered);
    }
    for (const [client, list] of items) this.enqueue(client, list);
  }

  /** Resolves once no lane check runs or waits. */
  idle(): Promise<void> {
    return this.lanes.idle();
  }

  /** Stops taking turns; resolves once the turns running have ended. */
  async close(): Promise<void> {
    this.closed = true;
    await this.lanes.idle();
  }

  /** The shared checks of a page: per collection and mode, one call over its changes' records. */
  private async checkShared(
    changes: readonly Change[],
    subscribersOf: (collection: CollectionSchema) => readonly LocalSubscription[],
    now: Date,
  ): Promise<Map<number, SharedCheck>> {
    const byCollection = new Map<CollectionSchema, number[]>();
    changes.forEach((change, index) => {
      const collection = this.options.collectionOf(change.collection);
      if (collection) addTo(byCollection, collection, index);
    });
    const result = new Map<number, SharedCheck>();
    for (const [collection, indexes] of byCollection) {
      const shared = subscribersOf(collection).filter((s) => s.shared && isOpen(s) && !deliveryOf(s.client).isolated);
      for (const mode of ['as-written', 'as-now'] as const) {
        const members = shared.filter((s) => modeOf(s) === mode);
        const reached = indexes.filter(reachedBy(members, changes));
        if (reached.length === 0) continue;
        const targets: CheckTarget[] = [];
        const targetOf = new Map<number, number>();
        const currentTarget = new Map<string, number>();
        for (const index of reached) {
          const target = targetFor(changes[index], mode);
          if (target.kind !== 'current') targetOf.set(index, targets.push(target) - 1);
          else {
            // Several changes of one record in a page: its current row is read once.
            let at = currentTarget.get(target.recordId);
            if (at === undefined) currentTarget.set(target.recordId, (at = targets.push(target) - 1));
            targetOf.set(index, at);
          }
        }
        const member = new Map(members.map((s, i) => [s, i]));
        const conditions = memberConditions(members, now);
        let outcome: CheckOutcome | 'failed';
        try {
          outcome = await checkRecords({
            runner: this.runnerWithin(this.context(SHARED_CHECKS_CLIENT)),
            collection,
            targets,
            conditions: conditions.conditions,
            staleness: mode === 'as-now',
          });
        } catch (error) {
          await this.assertDatabaseAnswers(error);
          this.report(`realtime: the shared check of ${reached.length} change(s) of ${collection.name} failed; its subscribers are checked one client at a time`, error);
          outcome = 'failed';
        }
        for (const index of reached) {
          const checks = result.get(index) ?? {};
          checks[mode] = { outcome, target: targetOf.get(index)!, member, conditions };
          result.set(index, checks);
        }
      }
    }
    return result;
  }

  /**
   * Appends one change's items to `items`: frames for the shared subscriptions that hold (the
   * record presented once per shape), and a check for every client whose subscriptions must be
   * checked in its lane.
   */
  private async collectItems(options: {
    change: Change;
    collection: CollectionSchema;
    subscriptions: readonly LocalSubscription[];
    shared: SharedCheck | undefined;
    now: Date;
    items: Map<LocalClient, DeliveryItem[]>;
  }): Promise<void> {
    const { change, collection, now, items } = options;
    const toCheck = new Map<LocalClient, LocalSubscription[]>();
    /** Holding subscriptions per message: by their shape and the guarded fields that show to them. */
    const groups = new Map<string, MessageGroup>();
    for (const sub of options.subscriptions) {
      if (!isOpen(sub) || !reaches(sub, change)) continue;
      const mode = modeOf(sub);
      const check = options.shared?.[mode];
      const index = check?.member.get(sub);
      if (!check || index === undefined || check.outcome === 'failed' || deliveryOf(sub.client).isolated) {
        addTo(toCheck, sub.client, sub);
        continue;
      }
      if (!check.outcome.holds(index, check.target)) continue;
      const idOnly = mode === 'as-now' && change.action === 'delete' && check.outcome.stale[check.target];
      const fields = check.conditions.fieldsOf(check.outcome, index, check.target);
      const key = idOnly ? '' : `${mode}|${sub.shapeGroup}|${fields.key}`;
      const group = groups.get(key);
      if (group) group.members.push(sub);
      else groups.set(key, { row: check.outcome.rows[check.target]!, visible: fields.visible, members: [sub] });
    }
    let presented = 0;
    let bytes = 0;
    // The largest groups first: what goes past the per-change budget is checked in lanes.
    for (const [key, { row, visible, members }] of [...groups].sort((a, b) => b[1].members.length - a[1].members.length)) {
      if (presented >= SHARED_SHAPES_PER_CHANGE || bytes >= SHARED_BYTES_PER_CHANGE) {
        for (const sub of members) addTo(toCheck, sub.client, sub);
        continue;
      }
      const data = key === '' ? idOnlyMessage(change, collection) : await this.present({ change, collection, row, visible, first: members[0], context: this.context(SHARED_CHECKS_CLIENT) });
      presented++;
      if (!data) continue;
      bytes += data.length;
      for (const sub of members) addTo(items, sub.client, frameOf(sub, data));
    }
    for (const [client, subscriptions] of toCheck) addTo(items, client, { kind: 'check', change, subscriptions, now });
  }

  /** Queues `list` for `client` in order and writes what is ready; a client too far behind is dropped. */
  private enqueue(client: LocalClient, list: readonly DeliveryItem[]): void {
    const delivery = deliveryOf(client);
    for (const item of list) {
      const last = delivery.items[delivery.items.length - 1];
      if (item.kind === 'ready' && last?.kind === 'ready') {
        last.chunks.push(...item.chunks);
        last.bytes += item.bytes;
        continue;
      }
      delivery.items.push(item);
      if (item.kind === 'check') delivery.checks++;
    }
    if (delivery.checks > MAX_PENDING_CHECKS) {
      this.drop(client, `it is too far behind: ${delivery.checks} changes wait for its checks (at most ${MAX_PENDING_CHECKS})`);
      return;
    }
    this.drain(client);
  }

  /** Writes the ready items at the head of the client's queue; a check at the head waits for the client's turn. */
  private drain(client: LocalClient): void {
    const delivery = deliveryOf(client);
    if (delivery.checking) return;
    while (delivery.items.length > 0) {
      const head = delivery.items[0];
      if (head.kind === 'check') {
        this.lanes.wake(client);
        return;
      }
      delivery.items.shift();
      if (!client.stream?.writeChunks(head.chunks, head.bytes)) {
        this.clear(delivery);
        return;
      }
    }
  }

  /** One lane turn: the client's next check, its messages written, then what is ready after it. */
  private async takeTurn(client: LocalClient): Promise<void> {
    const delivery = deliveryOf(client);
    const head = delivery.items[0];
    if (this.closed || !client.stream?.isOpen) {
      this.clear(delivery);
      return;
    }
    if (head?.kind !== 'check') {
      this.drain(client);
      return;
    }
    delivery.items.shift();
    delivery.checks--;
    delivery.checking = true;
    let frames: DeliveryItem | undefined;
    try {
      frames = await this.checkInLane(client, head);
      delivery.failures = 0;
    } catch (error) {
      delivery.failures++;
      delivery.isolated = true;
      const reason = error instanceof Error ? error.message : String(error);
      if (delivery.failures >= MAX_CHECK_FAILURES) {
        delivery.checking = false;
        this.drop(client, `its subscriptions' checks failed ${delivery.failures} times in a row (last: ${reason})`);
        return;
      }
      this.report(`realtime: a ${head.change.action} of ${head.change.collection} was not delivered to a client: its check failed`, error);
    } finally {
      delivery.checking = false;
    }
    if (frames?.kind === 'ready' && !client.stream?.writeChunks(frames.chunks, frames.bytes)) {
      this.clear(delivery);
      return;
    }
    this.drain(client);
  }

  /** Checks one change for one client's subscriptions, and presents what holds (once per shape). */
  private async checkInLane(client: LocalClient, item: Extract<DeliveryItem, { kind: 'check' }>): Promise<DeliveryItem | undefined> {
    const { change } = item;
    const context = this.context(client.address ?? '');
    // The client may have posted its subscriptions again since: what it still subscribes to is
    // checked as it is now (with the identity it now has); what it dropped is not.
    const current = new Map(client.subscriptions.map((s) => [s.sub.raw, s]));
    const live = item.subscriptions.flatMap((s) => (s.active ? [s] : (current.get(s.sub.raw) ?? [])));
    const groups = new Map<string, MessageGroup>();
    for (const mode of ['as-written', 'as-now'] as const) {
      const subscriptions = live.filter((s) => modeOf(s) === mode);
      if (subscriptions.length === 0) continue;
      const conditions = memberConditions(subscriptions, item.now);
      const outcome = await checkRecords({
        runner: this.runnerWithin(context),
        collection: subscriptions[0].collection,
        targets: [targetFor(change, mode)],
        conditions: conditions.conditions,
        staleness: mode === 'as-now',
      });
      const row = outcome.rows[0];
      if (row === undefined) continue;
      subscriptions.forEach((sub, m) => {
        if (!outcome.holds(m, 0)) return;
        const idOnly = mode === 'as-now' && change.action === 'delete' && outcome.stale[0];
        const fields = conditions.fieldsOf(outcome, m, 0);
        const key = idOnly ? '' : `${mode}|${sub.shapeGroup}|${fields.key}`;
        const group = groups.get(key);
        if (group) group.members.push(sub);
        else groups.set(key, { row, visible: fields.visible, members: [sub] });
      });
    }
    const frames: DeliveryItem[] = [];
    const room = client.stream?.room ?? 0;
    let bytes = 0;
    for (const [key, { row, visible, members }] of groups) {
      // Past the stream's room the write drops the client: nothing more is worth presenting.
      if (bytes > room) break;
      const collection = members[0].collection;
      const data = key === '' ? idOnlyMessage(change, collection) : await this.present({ change, collection, row, visible, first: members[0], context });
      if (!data) continue;
      for (const sub of members) {
        bytes += data.length;
        frames.push(frameOf(sub, data));
      }
    }
    return mergeFrames(frames);
  }

  /**
   * The record presented for `first`'s shape and serialised once, or undefined (reported) when it
   * cannot be. `visible`: the guarded fields that show to the group, as its check decided (the
   * row is shared by every group: its values are read afresh for each).
   */
  private async present(options: {
    change: Change;
    collection: CollectionSchema;
    row: Record<string, unknown>;
    visible: readonly boolean[] | undefined;
    first: LocalSubscription;
    context: DatabaseContext;
  }): Promise<Buffer | undefined> {
    const { change, collection, first, visible } = options;
    try {
      const values = readRow(collection, options.row);
      const [record] = await this.options.presenter.present({
        collection,
        records: [visible === undefined ? values : withVisibleFields(collection, values, visible, first.caller)],
        caller: first.caller,
        shape: first.sub.shape,
        store: this.options.store.within(options.context),
      });
      return Buffer.from(JSON.stringify({ action: change.action, record }));
    } catch (error) {
      this.report(`realtime: a ${change.action} of ${collection.name} could not be shaped for "${first.sub.raw.slice(0, 200)}"`, error);
      return undefined;
    }
  }

  /** The bounds of one check: `checkTimeoutMs`, counted against `client`'s share of the pool. */
  private context(client: string): DatabaseContext {
    return { statementTimeoutMs: this.options.bounds.checkTimeoutMs, acquireTimeoutMs: this.options.bounds.acquireTimeoutMs, client };
  }

  /** A runner over delivery's pool whose statements are bounded by `context`. */
  private runnerWithin(context: DatabaseContext): StatementRunner {
    return new StatementRunner(this.options.runner.db, context);
  }

  /** Rethrows `error` when the database itself does not answer (the page is read again later). */
  private async assertDatabaseAnswers(error: unknown): Promise<void> {
    try {
      await checkDatabaseAnswers(this.options.runner.db, this.context(SHARED_CHECKS_CLIENT));
    } catch {
      throw error;
    }
  }

  private drop(client: LocalClient, reason: string): void {
    this.clear(deliveryOf(client));
    if (!this.closed) this.options.endClient(client, reason);
  }

  private clear(delivery: ClientDelivery): void {
    delivery.items.length = 0;
    delivery.checks = 0;
  }

  private report(message: string, error: unknown): void {
    if (this.closed) return;
    this.options.logger.warn(`${message}: ${error instanceof Error ? error.message : String(error)}`);
  }
}

/** Whether `sub` is live and its client's stream open. */
function isOpen(sub: LocalSubscription): boolean {
  return sub.active && sub.client.stream?.isOpen === true;
}

/** Whether `change` is one `sub` listens to: every record of its collection (`c/*`), or the one it names. */
function reaches(sub: LocalSubscription, change: Change): boolean {
  return sub.sub.recordId === undefined || sub.sub.recordId === change.recordId;
}

/** Whether the change at an index reaches any of `members` (one pass over them, not one per change). */
function reachedBy(members: readonly LocalSubscription[], changes: readonly Change[]): (index: number) => boolean {
  if (members.some((s) => s.sub.recordId === undefined)) return () => members.length > 0;
  const records = new Set(members.map((s) => s.sub.recordId));
  return (index) => records.has(changes[index].recordId);
}

/**
 * A delete whose rule reads other tables, when those may have changed since it was committed:
 * only which record went, none of its values (in doubt, nothing of a version the rules may not
 * have allowed).
 */
function idOnlyMessage(change: Change, collection: CollectionSchema): Buffer {
  return Buffer.from(JSON.stringify({ action: change.action, record: { id: change.recordId, collectionId: collection.id, collectionName: collection.name } }));
}

/** `id:<clientId>\nevent:<subscription>\ndata:<data>\n\n`, the data shared by reference. */
function frameOf(sub: LocalSubscription, data: Buffer): DeliveryItem {
  const head = `id:${sub.client.id}\nevent:${sub.sub.raw}\ndata:`;
  return { kind: 'ready', chunks: [head, data, '\n\n'], bytes: Buffer.byteLength(head) + data.length + 2 };
}

function mergeFrames(frames: readonly DeliveryItem[]): DeliveryItem | undefined {
  if (frames.length === 0) return undefined;
  const chunks: (string | Buffer)[] = [];
  let bytes = 0;
  for (const frame of frames) {
    if (frame.kind !== 'ready') continue;
    chunks.push(...frame.chunks);
    bytes += frame.bytes;
  }
  return { kind: 'ready', chunks, bytes };
}

function addTo<K, V>(map: Map<K, V[]>, key: K, value: V): void {
  const list = map.get(key);
  if (list) list.push(value);
  else map.set(key, [value]);
}
