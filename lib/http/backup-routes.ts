import { pipeline } from 'node:stream/promises';
import express, { type RequestHandler } from 'express';
import type { Identity } from '../auth/identity.js';
import type { BackupService } from '../backups/backup-service.js';
import { BadRequestError, ForbiddenError, UnauthorizedError } from '../errors.js';
import type { Logger } from '../logger.js';
import { readJsonBody } from './read-json-body.js';
import type { CallerResolver } from './resolve-caller.js';
import type { DownloadAccess, DownloadCallerResolver } from './resolve-download-caller.js';
import type { Route } from './route-table.js';

/** What the backups routes need from the router. */
export interface BackupRoutesOptions {
  backups: BackupService;
  /** Who is calling, from the Authorization header. */
  resolveCaller: CallerResolver;
  /** Who is downloading a backup (BACKUP_DOWNLOAD). */
  resolveDownloadCaller: DownloadCallerResolver;
  /** Where a download cut by a failing read is reported. */
  logger: Logger;
}

/** A create body is `{ "name": "..." }` at most. */
const MAX_CREATE_BODY = 4 * 1024;

/**
 * A download authorises with a superuser's file token of scope `all` in `?token=` (what the SDK's
 * `getDownloadURL(await pb.files.getToken(), key)` sends), or a superuser's Authorization header.
 * A file token stands for its superuser, not for one backup: it opens any backup that superuser
 * could list. A token of scope `files` (the dashboard's, which sits in image URLs) opens none.
 */
const BACKUP_DOWNLOAD: DownloadAccess = { scope: 'all', hostToken: 'header', what: 'a backup download' };

/** The identity if it is a superuser's; 401 for a guest, 403 for anyone else (nothing listed, nothing made). */
function requireSuperuser(identity: Identity | null): void {
  if (!identity) throw new UnauthorizedError('The backups API needs a superuser.', 'unauthorized');
  if (identity.superuser !== true) throw new ForbiddenError('Only superusers may use the backups API.');
}

/**
 * PocketBase's backups API for superusers (docs/deployment.md, "Backups"): list, create, download
 * by file token, delete. Uploading an archive and restoring one while serving are not supported
 * (400 `backup_not_supported`): a restore replaces the database under the running app, which
 * `recordbase restore` does with the app stopped.
 */
export function createBackupRoutes(options: BackupRoutesOptions): Route[] {
  const { backups, resolveCaller, resolveDownloadCaller } = options;
  const json = express.json({ limit: MAX_CREATE_BODY, strict: false });

  const list: RequestHandler = async (req, res) => {
    requireSuperuser((await resolveCaller(req)).request.auth);
    res.json(await backups.list());
  };

  const create: RequestHandler = async (req, res) => {
    requireSuperuser((await resolveCaller(req)).request.auth);
    const { name } = readJsonBody(req);
    if (name !== undefined && typeof name !== 'string') throw new BadRequestError('"name" must be a string.', 'invalid_backup_key');
    await backups.create({ name });
    res.status(204).end();
  };

  const download: RequestHandler = async (req, res) => {
    requireSuperuser((await resolveDownloadCaller(req, BACKUP_DOWNLOAD)).request.auth);
    const { info, stream } = await backups.open(req.params.key as string);
    res.setHeader('Content-Type', 'application/gzip');
    res.setHeader('Content-Length', String(info.size));
    res.setHeader('Content-Disposition', `attachment; filename="${info.key}"`);
    res.setHeader('Cache-Control', 'no-store');
    res.setHeader('X-Content-Type-Options', 'nosniff');
    if (req.method === 'HEAD') {
      stream.destroy();
      res.end();
      return;
    }
    await pipeline(stream, res).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'ERR_STREAM_PREMATURE_CLOSE') options.logger.error(`backup download of ${info.key} failed`, error);
    });
  };

  const remove: RequestHandler = async (req, res) => {
    requireSuperuser((await resolveCaller(req)).request.auth);
    await backups.remove(req.params.key as string);
    res.status(204).end();
  };

  const notWhileServing: RequestHandler = async (req) => {
    requireSuperuser((await resolveCaller(req)).request.auth);
    throw new BadRequestError('Uploading or restoring a backup is not supported while serving: stop the app and run `recordbase restore <file> --data-dir <dir>` (docs/deployment.md).', 'backup_not_supported');
  };

  return [
    { method: 'GET', path: '/api/backups', handlers: [list] },
    { method: 'POST', path: '/api/backups', handlers: [json, create] },
    { method: 'POST', path: '/api/backups/upload', handlers: [notWhileServing] },
    { method: 'GET', path: '/api/backups/:key', handlers: [download] },
    { method: 'DELETE', path: '/api/backups/:key', handlers: [remove] },
    { method: 'POST', path: '/api/backups/:key/restore', handlers: [notWhileServing] },
  ];
}
