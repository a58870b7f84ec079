import type { Identity } from '../auth/identity.js';
import type { Change } from './change-reader.js';
import type { SseStream } from './sse-stream.js';
import type { PreparedSubscription } from './subscription-conditions.js';

/** A stream this instance holds, and what it subscribed to. */
export interface LocalClient {
  readonly id: string;
  /** The address it connected from (`req.ip`): the group its checks take turns in (fair-lanes.ts). */
  address?: string;
  stream?: SseStream;
  identity: Identity | null;
  subscriptions: LocalSubscription[];
  /** Its delivery state, made on its first message (deliver-changes.ts). */
  delivery?: ClientDelivery;
}

/** A prepared subscription applied to its client. */
export interface LocalSubscription extends PreparedSubscription {
  readonly client: LocalClient;
  /** False once the client replaced its subscriptions: checks still waiting for it go to the new one of the same string, if any. */
  active: boolean;
}

/** What waits to be written to one client, in order. */
export type DeliveryItem =
  /** Frames ready to write (their byte count for the stream's bound). */
  | { readonly kind: 'ready'; chunks: (string | Buffer)[]; bytes: number }
  /** A change to check for some of its subscriptions in its own lane, with the instant its macros read. */
  | { readonly kind: 'check'; readonly change: Change; readonly subscriptions: readonly LocalSubscription[]; readonly now: Date };

/** One client's delivery: its queue, whether its checks run alone, and how they fared. */
export interface ClientDelivery {
  readonly items: DeliveryItem[];
  /** Its checks run in its own lane from now on (a costly subscription, or a check that failed). */
  isolated: boolean;
  /** Checks that failed in a row; at MAX_CHECK_FAILURES the stream ends so the client resubscribes. */
  failures: number;
  /** `check` items in `items`. */
  checks: number;
  /** A check of its runs now: nothing behind it may be written before its messages. */
  checking: boolean;
}
