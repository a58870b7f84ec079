/**
 * The warning for a replace-mode multipart update that its update rule refused after the update
 * cleared fields it did not send: the caller only sees the usual 404 (it must learn nothing more),
 * so the host's log is the one place that says why and what to change.
 */
import type { Logger } from '../logger.js';
import type { CollectionSchema } from '../schema/collection-schema.js';

/** How long a collection's warning stays quiet after it was given. */
const QUIET_MS = 60_000;
/** Collections remembered at once; past it the oldest is forgotten (and may warn again sooner). */
const MAX_REMEMBERED = 1000;
/** Field names a warning lists; the rest are counted. */
const MAX_NAMED_FIELDS = 20;

/** Reports a refused replace-mode update; see createClearedFieldsWarning. */
export type ClearedFieldsWarning = (collection: CollectionSchema, cleared: readonly string[]) => void;

/**
 * Builds the reporter: one `logger.warn` per collection per minute at most, naming the collection
 * and the cleared fields (names only: never a value, a token or the caller), and pointing at
 * `multipartUpdate: 'merge'`. Nothing when no field was cleared (the rule refused the update
 * for reasons of its own). `now` is the clock, for tests.
 */
export function createClearedFieldsWarning(logger: Logger, now: () => number = Date.now): ClearedFieldsWarning {
  const lastWarned = new Map<string, number>();
  return (collection, cleared) => {
    if (cleared.length === 0) return;
    const time = now();
    const last = lastWarned.get(collection.id);
    if (last !== undefined && time - last < QUIET_MS) return;
    lastWarned.delete(collection.id);
    if (lastWarned.size >= MAX_REMEMBERED) lastWarned.delete(lastWarned.keys().next().value!);
    lastWarned.set(collection.id, time);
    const named = cleared.slice(0, MAX_NAMED_FIELDS).join(', ');
    const more = cleared.length > MAX_NAMED_FIELDS ? ` and ${cleared.length - MAX_NAMED_FIELDS} more` : '';
    logger.warn(
      `a multipart update of "${collection.name}" was refused by its update rule (answered 404) after clearing the fields it did not send: ${named}${more}. ` +
        `A multipart update in replace mode (the default) clears every field it does not send; send them too, or set multipartUpdate: 'merge' to change only what is sent (docs/files.md). ` +
        `Reported at most once a minute per collection.`,
    );
  };
}
