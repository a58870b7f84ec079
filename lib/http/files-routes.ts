import express, { type Request, type RequestHandler } from 'express';
import { FILE_TOKEN_SCOPES, type FileTokens, type FileTokenScope } from '../auth/file-token.js';
import { BadRequestError, UnauthorizedError } from '../errors.js';
import { buildFileKey } from '../files/file-names.js';
import { lookupContentTypeOfName } from '../files/sniff-mime-type.js';
import type { Storage } from '../files/storage.js';
import type { ThumbnailCache } from '../files/thumbnail-cache.js';
import { isThumbnailable, parseThumbnailRequest } from '../files/thumbnail-spec.js';
import type { RecordService } from '../records/record-service.js';
import type { Logger } from '../logger.js';
import { readQueryParam } from './parse-list-query.js';
import { readJsonBody } from './read-json-body.js';
import type { CallerResolver } from './resolve-caller.js';
import type { DownloadAccess, DownloadCallerResolver } from './resolve-download-caller.js';
import { sendStoredFile } from './send-stored-file.js';
import type { Route } from './route-table.js';
import { operationContextOf } from './request-database-context.js';

/** What the file routes need from the router. */
export interface FilesRoutesOptions {
  records: RecordService;
  storage: Storage;
  thumbnails: ThumbnailCache;
  /** Signs the tokens `POST /api/files/token` hands out. */
  fileTokens: FileTokens;
  /** Who is calling, from the Authorization header: who asks for a file token. */
  resolveCaller: CallerResolver;
  /** Who is downloading a protected file (FILE_DOWNLOAD): a file token, or the host's token from the header, cookie or `?token=`. */
  resolveDownloadCaller: DownloadCallerResolver;
  /** Where a storage failure in mid-download is reported. */
  logger: Logger;
}

/**
 * Public files never change under a name (a new upload gets a new random name), so they may be
 * cached for long; protected ones may be stored by the browser only, and revalidated (ETag) each
 * time, so that the access check runs on every use.
 */
const PUBLIC_CACHE = 'public, max-age=2592000, stale-while-revalidate=86400';
const PROTECTED_CACHE = 'private, no-cache';

/** A protected file opens with a file token of either scope, and with the host's token wherever a download may carry it. */
const FILE_DOWNLOAD: DownloadAccess = { scope: 'files', hostToken: 'download', what: 'a file download' };

/** `?download=1` (or any value but `0`/`false`) asks for an attachment. */
function wantsDownload(req: Request): boolean {
  const value = readQueryParam(req.query, 'download');
  return value !== undefined && value !== '0' && value.toLowerCase() !== 'false';
}

/** A token request is `{ "scope": "files" }` at most. */
const MAX_TOKEN_BODY = 1024;

/**
 * The scope a token request asks for: `all` without one, as the SDK's `pb.files.getToken()`
 * sends no body and PocketBase's token opens backups too; `files` is what the dashboard asks.
 */
function readTokenScope(req: Request): FileTokenScope {
  const { scope } = readJsonBody(req);
  if (scope === undefined) return 'all';
  if (typeof scope !== 'string' || !FILE_TOKEN_SCOPES.includes(scope as FileTokenScope)) {
    throw new BadRequestError(`"scope" must be one of ${FILE_TOKEN_SCOPES.map((known) => `"${known}"`).join(', ')} (or left out, for "all").`, 'invalid_parameter');
  }
  return scope as FileTokenScope;
}

/** A flag parameter such as `?center` counts when present, whatever its value. */
function hasFlag(req: Request, name: string): boolean {
  return Object.prototype.hasOwnProperty.call(req.query, name);
}

/**
 * The file routes (docs/files.md, docs/protected-files.md): downloads with thumbnails, and file tokens. Handlers
 * parse the request and delegate: access to the record service, bytes to the storage, images to
 * the thumbnail cache, headers to sendStoredFile.
 */
export function createFilesRoutes(options: FilesRoutesOptions): Route[] {
  const { records, storage, thumbnails, fileTokens, resolveDownloadCaller } = options;

  const download: RequestHandler = async (req, res) => {
    const collection = records.collection(req.params.collection as string);
    const recordId = req.params.recordId as string;
    const name = req.params.filename as string;
    // The caller is resolved only for a protected file: a public download never calls the host's auth().
    const { field } = await records.findFileOwner(collection, { id: recordId, name, caller: () => resolveDownloadCaller(req, FILE_DOWNLOAD) }, operationContextOf(req));
    const definition = field.definition;
    const spec = parseThumbnailRequest(
      {
        thumb: readQueryParam(req.query, 'thumb'),
        quality: readQueryParam(req.query, 'quality'),
        format: readQueryParam(req.query, 'format'),
        center: hasFlag(req, 'center'),
        stretch: hasFlag(req, 'stretch'),
      },
      { allowedSizes: definition.thumbs },
    );
    const cacheControl = definition.protected === true ? PROTECTED_CACHE : PUBLIC_CACHE;
    const download = wantsDownload(req);
    // Once headers are out, a storage failure can only cut the connection; the log says why.
    const onBodyError = (err: unknown) => options.logger.error(`${req.method} a file of collection "${collection.name}": storage failed mid-download`, err);
    const mimeType = lookupContentTypeOfName(name);
    if (spec && isThumbnailable(mimeType)) {
      const sizesListed = (definition.thumbs?.length ?? 0) > 0;
      const thumb = await thumbnails.get({ collectionId: collection.id, recordId, name, mimeType, spec, sizesListed });
      if (thumb) {
        await sendStoredFile(req, res, { storage, key: thumb.key, fileName: name, contentType: thumb.contentType, download, cacheControl, onBodyError, info: thumb.info });
        return;
      }
    }
    const key = buildFileKey({ collectionId: collection.id, recordId, name });
    await sendStoredFile(req, res, { storage, key, fileName: name, contentType: mimeType, download, cacheControl, onBodyError });
  };

  const token: RequestHandler = async (req, res) => {
    const caller = await options.resolveCaller(req);
    if (!caller.request.auth) throw new UnauthorizedError('A file token needs an authenticated caller.', 'unauthorized');
    res.json({ token: fileTokens.sign(caller.request.auth, { scope: readTokenScope(req) }) });
  };

  const file = '/api/files/:collection/:recordId/:filename';
  return [
    { method: 'GET', path: file, handlers: [download] },
    { method: 'HEAD', path: file, handlers: [download] },
    { method: 'POST', path: '/api/files/token', handlers: [express.json({ limit: MAX_TOKEN_BODY, strict: false }), token] },
  ];
}
