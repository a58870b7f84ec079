import type { GateRefusal } from './fair-gate.js';

/** Why a statement did not run to its end (see `StatementInterruptedError`). */
export type InterruptionReason = 'timeout' | 'aborted' | 'unresponsive' | 'busy' | 'queue_full';

/**
 * A statement that recordbase stopped, or never started: over the statement timeout (`timeout`),
 * abandoned by its client (`aborted`), sent to a database that did not even answer the cancel
 * (`unresponsive`), never given a connection within the acquire timeout (`busy`), or refused
 * because too many units of its client, or of all clients, already wait for one (`queue_full`,
 * a QueueFullError). translateDatabaseError turns it into the client's error.
 */
export class StatementInterruptedError extends Error {
  constructor(
    readonly reason: InterruptionReason,
    /** The limit that was reached, in milliseconds (for `timeout` and `busy`). */
    readonly limitMs?: number,
    /**
     * Whether the statement reached the database. One refused before it was sent (its client
     * had already gone, or no connection came) changed nothing; one stopped while it ran may
     * have been committed (a cancel that came too late, an engine that cannot stop it).
     */
    readonly sent = true,
  ) {
    super(`statement ${reason}${limitMs === undefined ? '' : ` (${limitMs} ms)`}`);
    this.name = 'StatementInterruptedError';
  }
}

/**
 * A unit of work refused at the fair gate without waiting: its client already has
 * `maxWaitingPerClient` units waiting for a connection, or all clients together MAX_WAITING.
 */
export class QueueFullError extends StatementInterruptedError {
  /** What the client is told (kept apart from `message`, which Knex may prefix with a statement). */
  readonly clientMessage: string;

  constructor(readonly refusal: GateRefusal) {
    super('queue_full', undefined, false);
    this.name = 'QueueFullError';
    this.clientMessage =
      refusal.refused === 'client'
        ? `The database is busy: ${refusal.limit} requests from this client already wait for a connection (limits.maxWaitingPerClient). Try again later.`
        : `The database is busy: ${refusal.limit} requests already wait for a connection. Try again later.`;
  }
}
