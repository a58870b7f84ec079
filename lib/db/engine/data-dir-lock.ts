import { randomBytes } from 'node:crypto';
import { linkSync, mkdirSync, readFileSync, renameSync, statSync, unlinkSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** Who holds a lock, as written in the lock file. */
interface LockHolder {
  pid: number;
  host: string;
  since: string;
  /** Tells this acquisition apart from any other, so a release never removes someone else's lock. */
  token: string;
}

/** A held lock; `release()` removes the lock file if it is still ours. Idempotent. */
export interface DataDirLock {
  readonly file: string;
  release(): void;
}

/** Lock files this process holds: a second router of this process is refused, a leftover of an earlier process with our pid is not. */
const heldHere = new Set<string>();

/** Attempts at taking over a stale lock before giving up (another process racing for it). */
const TAKEOVER_ATTEMPTS = 3;

/**
 * The holder touches its lock file this often; a lock not touched for LOCK_EXPIRES_MS is stale
 * whoever holds it. That is what frees a lock whose holder cannot be checked: a process on
 * another host, or a previous container of this app (another hostname, and often our own pid).
 */
export const LOCK_REFRESH_MS = 15_000;
export const LOCK_EXPIRES_MS = 60_000;

function readHolder(file: string): LockHolder | undefined {
  try {
    const parsed = JSON.parse(readFileSync(file, 'utf8')) as Partial<LockHolder>;
    if (typeof parsed.pid === 'number' && typeof parsed.host === 'string' && typeof parsed.token === 'string') return parsed as LockHolder;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') throw error;
  }
  // Unreadable: the file is only ever created whole (link of a complete file), so this is damage, not a writer at work.
  return undefined;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: the process exists but belongs to another user.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * A lock is stale when its holder is certainly gone: a process of this host that no longer runs,
 * or one that has our pid but is not us (a restarted container gets the same pid); or when its
 * holder has not touched it for LOCK_EXPIRES_MS (a holder on another host cannot be checked).
 */
function isStale(file: string, holder: LockHolder | undefined): boolean {
  if (holder === undefined) return true;
  try {
    if (Date.now() - statSync(file).mtimeMs > LOCK_EXPIRES_MS) return true;
  } catch {
    return true; // gone meanwhile
  }
  if (holder.host !== os.hostname()) return false;
  if (holder.pid === process.pid) return !heldHere.has(file);
  return !isAlive(holder.pid);
}

function describeHolder(file: string, holder: LockHolder): string {
  const who = holder.pid === process.pid && holder.host === os.hostname() ? `this process (pid ${holder.pid} on ${holder.host}: another router or command opened it first)` : `process ${holder.pid} on host ${holder.host}`;
  return `${who}, since ${holder.since}; the lock is ${file}, and expires ${LOCK_EXPIRES_MS / 1000} s after its holder stops refreshing it`;
}

/**
 * Takes the lock that gives one process (and one router in it) the embedded database in
 * `directory`: a file `<directory>.lock` beside the folder, naming the holder's pid and host.
 * Throws, naming the folder and the holder, when a live holder has it; takes over a lock whose
 * holder is gone. Two writers on one PGlite folder would diverge and lose acknowledged writes.
 */
export function acquireDataDirLock(directory: string): DataDirLock {
  const folder = path.resolve(directory);
  const file = `${folder}.lock`;
  mkdirSync(path.dirname(file), { recursive: true });
  const holder: LockHolder = { pid: process.pid, host: os.hostname(), since: new Date().toISOString(), token: randomBytes(12).toString('hex') };
  // Written whole under a private name, then linked into place: link fails if the lock exists, atomically.
  const draft = `${file}.${holder.token}`;
  writeFileSync(draft, JSON.stringify(holder));
  try {
    for (let attempt = 0; ; attempt++) {
      try {
        linkSync(draft, file);
        break;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      }
      let current: LockHolder | undefined;
      try {
        current = readHolder(file);
      } catch {
        continue; // released meanwhile: try again
      }
      if (!isStale(file, current) || attempt >= TAKEOVER_ATTEMPTS) {
        const by = current ? describeHolder(file, current) : `an unreadable lock file ${file}`;
        throw new Error(
          `The embedded database folder ${folder} is in use by ${by}. One process (and one router) at a time may open it: ` +
            'stop the other one, or give this router its own dataDir or a Postgres database.',
        );
      }
      removeStaleLock(file, current);
    }
  } finally {
    unlinkSync(draft);
  }
  heldHere.add(file);
  let released = false;
  const refresh = setInterval(() => {
    try {
      if (readHolder(file)?.token === holder.token) utimesSync(file, new Date(), new Date());
    } catch {
      // removed by hand: nothing to refresh
    }
  }, LOCK_REFRESH_MS);
  refresh.unref();
  return {
    file,
    release() {
      if (released) return;
      released = true;
      clearInterval(refresh);
      heldHere.delete(file);
      try {
        if (readHolder(file)?.token === holder.token) unlinkSync(file);
      } catch {
        // Already gone: nothing to release.
      }
    },
  };
}

/**
 * Removes a stale lock without removing a fresh one that another process put in its place after
 * we read the stale one: the file is first moved aside (atomic, one process wins), then checked.
 */
function removeStaleLock(file: string, stale: LockHolder | undefined): void {
  const aside = `${file}.stale-${randomBytes(6).toString('hex')}`;
  try {
    renameSync(file, aside);
  } catch {
    return; // someone else moved or released it: the next attempt sees what is there now
  }
  let moved: LockHolder | undefined;
  try {
    moved = readHolder(aside);
  } catch {
    moved = undefined;
  }
  if (moved !== undefined && moved.token !== stale?.token) {
    // We moved a live lock taken meanwhile: put it back (unless yet another one is there now).
    try {
      linkSync(aside, file);
    } catch {
      // the place is taken again; the next attempt reads whoever has it
    }
  }
  unlinkSync(aside);
}
