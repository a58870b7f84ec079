import type { Identity } from '../auth/identity.js';

/**
 * Base64 characters of an identity per notification: with the message around them, far under
 * the 8,000 bytes Postgres allows a NOTIFY payload. Base64, so that what JSON would escape or
 * UTF-8 would widen cannot push a part over.
 */
const PART_CHARS = 6_000;
/** Parts one hand-off may have (an identity of about 4 MB): a malformed count is not buffered for. */
const MAX_PARTS = 1_000;

/** An identity as the parts of a hand-off: base64 of its JSON, at most PART_CHARS each, one or more. */
export function splitIdentity(identity: Identity | null): string[] {
  const text = Buffer.from(JSON.stringify(identity), 'utf8').toString('base64');
  const parts: string[] = [];
  for (let start = 0; start < text.length; start += PART_CHARS) parts.push(text.slice(start, start + PART_CHARS));
  return parts;
}

/** An identity as JSON decoded it: null (a guest) or an object with a string `id`; anything else is undefined. */
function readIdentity(value: unknown): Identity | null | undefined {
  if (value === null) return null;
  if (typeof value === 'object' && !Array.isArray(value) && typeof (value as { id?: unknown }).id === 'string') return value as Identity;
  return undefined;
}

/**
 * The receiving side of forwarded identities: a POST taken by another instance sends its identity
 * to the instance holding the stream in notifications, never through a table, so that no host's
 * identity (a session token in it, say) is kept in the database. Parts of one hand-off arrive
 * together; a hand-off still incomplete after `timeoutMs` is dropped (its POST has answered 503 by
 * then), so what is buffered is bounded by what arrives in that time.
 */
export class IdentityHandoffs {
  private readonly pending = new Map<string, { parts: (string | undefined)[]; missing: number; timer: NodeJS.Timeout }>();

  constructor(private readonly timeoutMs: number) {}

  /**
   * Adds part `index` of `count` of the hand-off `key`. Returns the identity once every part has
   * arrived; undefined while parts are missing, or for a malformed hand-off (dropped).
   */
  add(key: string, index: unknown, count: unknown, part: unknown): { identity: Identity | null } | undefined {
    if (typeof part !== 'string' || !Number.isInteger(count) || !Number.isInteger(index)) return undefined;
    const total = count as number;
    const at = index as number;
    if (total < 1 || total > MAX_PARTS || at < 0 || at >= total) return undefined;
    let handoff = this.pending.get(key);
    if (!handoff) {
      if (total === 1) return this.decode([part]);
      const timer = setTimeout(() => this.pending.delete(key), this.timeoutMs);
      timer.unref();
      handoff = { parts: new Array<string | undefined>(total), missing: total, timer };
      this.pending.set(key, handoff);
    }
    if (handoff.parts.length !== total) {
      this.drop(key);
      return undefined;
    }
    if (handoff.parts[at] === undefined) {
      handoff.parts[at] = part;
      handoff.missing--;
    }
    if (handoff.missing > 0) return undefined;
    this.drop(key);
    return this.decode(handoff.parts as string[]);
  }

  /** Drops every hand-off in progress (close()). */
  clear(): void {
    for (const key of [...this.pending.keys()]) this.drop(key);
  }

  private drop(key: string): void {
    const handoff = this.pending.get(key);
    if (!handoff) return;
    clearTimeout(handoff.timer);
    this.pending.delete(key);
  }

  private decode(parts: readonly string[]): { identity: Identity | null } | undefined {
    let value: unknown;
    try {
      value = JSON.parse(Buffer.from(parts.join(''), 'base64').toString('utf8'));
    } catch {
      return undefined;
    }
    const identity = readIdentity(value);
    return identity === undefined ? undefined : { identity };
  }
}
