import type { Identity } from '../auth/identity.js';
import { runWithTryAdvisoryLock } from '../db/statements/advisory-lock.js';
import type { StatementRunner } from '../db/statements/statement-runner.js';
import {
  beatInstance,
  loadClientRow,
  notifyChannel,
  pruneOutboxBatch,
  removeClientRow,
  removeExpiredInstances,
  removeInstance,
  upsertClient,
  withClientLocked,
  type CaptureNeeds,
  type ClientRow,
  type StoredIdentity,
} from '../db/realtime/realtime-registry-sql.js';
import { OUTBOX_PRUNE_LOCK_KEY } from '../db/shared-names.js';
import { ForbiddenError, NotFoundError, TooManyRequestsError } from '../errors.js';
import { TransactionWaiter } from './transaction-waiter.js';

/** Outbox rows removed per prune transaction, and batches per prune round. */
const PRUNE_BATCH_ROWS = 1_000;
const PRUNE_MAX_BATCHES = 1_000;

/** The part of an identity the registry stores. */
export function storedIdentity(identity: Pick<Identity, 'id' | 'superuser'> | null): StoredIdentity | null {
  return identity === null ? null : { id: identity.id, superuser: identity.superuser === true };
}

/** Whether a POST's identity may replace the client's (PocketBase's isSameAuth): guest to signed-in is allowed, nothing else changes. */
export function mayChangeIdentity(before: Pick<Identity, 'id'> | null, after: Pick<Identity, 'id'> | null): boolean {
  return before === null || (after !== null && after.id === before.id);
}

/** What one heartbeat found. */
export interface HeartbeatResult {
  /** This instance's row had to be made again (another instance took it for gone): register the open clients again. */
  remade: boolean;
  /**
   * Some realtime instance (this one included) was live just before: capture was on. False at a
   * first start, or after a stall so long that every instance's row expired (nothing was captured
   * meanwhile).
   */
  captureWasOn: boolean;
}

/**
 * The realtime registry in Postgres (docs/realtime.md, "How it works"): instances with their
 * heartbeats and expiries, and every open stream's client id, owner instance, stored identity and
 * subscriptions, so a POST may reach any instance. The capture gate reads both: a collection's
 * changes are captured while a client subscribes to it and a realtime instance is live.
 */
export class ClientRegistry {
  private readonly maxClientsPerIdentity: number;
  /** Shared by every wait of this instance, so many waiting POSTs cost the database what one does. */
  private readonly transactionWaiter: TransactionWaiter;

  constructor(
    /** Where the registry's statements go (realtime's, bounded by its limits). */
    private readonly runner: StatementRunner,
    readonly instanceId: string,
    limits: { maxClientsPerIdentity?: number } = {},
  ) {
    this.maxClientsPerIdentity = limits.maxClientsPerIdentity ?? Number.POSITIVE_INFINITY;
    this.transactionWaiter = new TransactionWaiter(runner);
  }

  /**
   * Refreshes this instance's row, live until `lifetimeMs` from now (the capture function writes
   * while some row is live), and removes instances whose own expiry passed, with their clients.
   */
  async heartbeat(lifetimeMs: number): Promise<HeartbeatResult> {
    const beat = await beatInstance(this.runner, { instanceId: this.instanceId, lifetimeMs });
    await removeExpiredInstances(this.runner);
    return { remade: beat.inserted, captureWasOn: beat.wasLive };
  }

  /**
   * Waits until every transaction running in this database now (but this registry's own
   * statement) has ended, up to `timeoutMs`; false if some were still running then. One that has
   * not written yet (and whose snapshot may already be taken) is waited for too. Every wait of this
   * instance shares one TransactionWaiter: one listing per round for all who joined, one poll for all.
   */
  async waitForRunningTransactions(timeoutMs: number): Promise<boolean> {
    return this.transactionWaiter.wait(timeoutMs);
  }

  /**
   * Removes outbox rows older than `retentionMs`, or older than `idleRetentionMs` while no client
   * of any instance subscribes to anything. One instance at a time (OUTBOX_PRUNE_LOCK_KEY), in
   * batches of 1,000 rows each in its own short transaction (at most 1,000 batches per call; the
   * rest next time). A deleting transaction holds the server's snapshot xmin, and so every
   * instance's delivery, while it runs: one long `DELETE` of a large backlog would stall realtime
   * for its whole duration. The lock's own transaction writes nothing, so it takes no transaction
   * id and holds nothing back. Returns the rows removed.
   */
  async pruneOutbox(retention: { retentionMs: number; idleRetentionMs: number }): Promise<number> {
    const idleRetentionMs = Math.min(retention.idleRetentionMs, retention.retentionMs);
    const outcome = await runWithTryAdvisoryLock({ runner: this.runner, key: OUTBOX_PRUNE_LOCK_KEY }, async () => {
      let removed = 0;
      for (let batch = 0; batch < PRUNE_MAX_BATCHES; batch++) {
        // On this.runner (autocommit), not the lock's transaction: each batch commits at once.
        const count = await pruneOutboxBatch(this.runner, { retentionMs: retention.retentionMs, idleRetentionMs, limit: PRUNE_BATCH_ROWS });
        removed += count;
        if (count < PRUNE_BATCH_ROWS) break;
      }
      return removed;
    });
    return outcome.acquired ? outcome.result : 0;
  }

  /**
   * Registers a stream held by this instance (before its PB_CONNECT is written, so any instance
   * may take its POST at once), or again after this instance was taken for gone. Of the identity,
   * only StoredIdentity is written.
   */
  async addClient(clientId: string, identity: Identity | null = null): Promise<void> {
    await upsertClient(this.runner, { clientId, instanceId: this.instanceId, identity: storedIdentity(identity) });
  }

  /** Removes a stream's row (it closed). */
  async removeClient(clientId: string): Promise<void> {
    await removeClientRow(this.runner, clientId);
  }

  /** Removes this instance and its clients (close()). */
  async removeInstance(): Promise<void> {
    await removeInstance(this.runner, this.instanceId);
  }

  /**
   * Stores a client's new identity (StoredIdentity only) and subscriptions, its row locked
   * meanwhile: 404 when no instance holds the client, 403 when the identity would change
   * (mayChangeIdentity), 429 when the client would take an identity that `maxClientsPerIdentity`
   * other clients already hold. `needs`: what the capture gate reads of them. Returns the owning
   * instance, and whether this switched capture on for some collection: then a write whose capture
   * trigger looked before the commit captured nothing, and may still commit.
   */
  async setSubscriptions(clientId: string, identity: Identity | null, subscriptions: readonly string[], needs: CaptureNeeds): Promise<{ owner: string; switchedCaptureOn: boolean }> {
    const stored = storedIdentity(identity);
    return withClientLocked(this.runner, clientId, async (client) => {
      if (!client) throw new NotFoundError(undefined, 'realtime_client_not_found');
      if (!mayChangeIdentity(client.identity, stored)) throw new ForbiddenError(undefined, 'realtime_auth_mismatch');
      // A client that already holds the identity is counted already; one that takes it now needs a free slot.
      if (stored !== null && client.identity === null && Number.isFinite(this.maxClientsPerIdentity)) {
        await client.lockIdentity(stored.id);
        if ((await client.countOthersWithIdentity(stored.id)) >= this.maxClientsPerIdentity) {
          throw new TooManyRequestsError(
            `This identity already has ${this.maxClientsPerIdentity} realtime clients (realtime.maxClientsPerIdentity); close one first.`,
            'realtime_too_many_clients_per_identity',
          );
        }
      }
      const switchedCaptureOn = await client.store({ identity: stored, subscriptions }, needs);
      return { owner: client.instanceId, switchedCaptureOn };
    });
  }

  /** A client's row, or undefined when it is gone. */
  async loadClient(clientId: string): Promise<ClientRow | undefined> {
    return loadClientRow(this.runner, clientId);
  }

  /**
   * Sends `payloads` on `channel` (an instance's own channel) in one statement, so in one
   * transaction: they arrive together, in order. Each must be under 8,000 bytes (Postgres' bound).
   */
  async notify(channel: string, payloads: readonly string[]): Promise<void> {
    await notifyChannel(this.runner, channel, payloads);
  }
}
