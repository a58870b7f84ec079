import { BadRequestError } from '../errors.js';

/** Every backup is one gzip-compressed tar archive, named `<name>.tar.gz`. */
export const BACKUP_SUFFIX = '.tar.gz';

/**
 * A backup's key: lower-case letters, digits, `_` and `-`, then `.tar.gz`. No `/`, no `.` of its
 * own, no NUL: a key is a file name inside the backups folder and can never name anything else,
 * whatever a client puts in a URL or a body (`../x`, `%2e%2e`, an absolute path).
 */
const BACKUP_KEY = /^[a-z0-9_-]{1,150}\.tar\.gz$/;

/** Whether `key` names a backup (without throwing: the folder listing skips other files). */
export function isBackupKey(key: unknown): key is string {
  return typeof key === 'string' && BACKUP_KEY.test(key);
}

/** `key` if it names a backup; otherwise a 400 `invalid_backup_key` that says what a key looks like. */
export function checkBackupKey(key: unknown): string {
  if (isBackupKey(key)) return key;
  throw new BadRequestError('Invalid backup key: expected lower-case letters, digits, "_" or "-" (at most 150) followed by ".tar.gz".', 'invalid_backup_key');
}

/** The key of a new backup: the one asked for, or `rb_backup_<UTC timestamp>.tar.gz` as PocketBase names its own. */
export function nameNewBackup(name: unknown, now: Date): string {
  if (name === undefined || name === null || name === '') {
    const stamp = now.toISOString().replace(/[-:T]/g, '').slice(0, 14);
    return `rb_backup_${stamp}${BACKUP_SUFFIX}`;
  }
  return checkBackupKey(name);
}
