import type { Request } from 'express';
import { DOWNLOAD_SOURCES, extractToken } from '../auth/extract-token.js';
import type { FileTokens, FileTokenScope } from '../auth/file-token.js';
import { ForbiddenError, UnauthorizedError } from '../errors.js';
import type { Caller } from '../records/caller.js';
import { describeRequest, type CallerResolver } from './resolve-caller.js';

/** What a download route lets in besides the caller resolvers' tokens: the file-token scope it needs, and where a host's token may come from. */
export interface DownloadAccess {
  /** `files`: a file token of any scope opens it; `all`: only one of scope `all`, a `files` token is a 403. */
  scope: FileTokenScope;
  /**
   * Where a token for the host's `auth()` is read: `download`, from the header, the `pb_session`
   * cookie or `?token=` (what lets an `<img>` load a protected file); `header`, from the
   * Authorization header only. File tokens are read from all three either way.
   */
  hostToken: 'header' | 'download';
  /** The download, as the 403 for a token of too narrow a scope names it ("a backup download"). */
  what: string;
}

/** Who is downloading, for a route that declares what it accepts; see createDownloadCallerResolver. */
export type DownloadCallerResolver = (req: Request, access: DownloadAccess) => Promise<Caller>;

/**
 * Builds the one resolver of download callers, over the router's caller resolvers (one per token
 * source, so an `auth()` failure is still reported once per cause). A file token (in the header,
 * the `pb_session` cookie or `?token=`) is verified here and never reaches `auth()`: 401
 * `invalid_file_token` when it is forged or expired, 403 when its scope does not open the route;
 * it stands for the id and superuser flag it was signed for. Any other token goes to `auth()`
 * through the resolver of the route's `hostToken` source.
 */
export function createDownloadCallerResolver(options: { fileTokens: FileTokens; callers: Record<DownloadAccess['hostToken'], CallerResolver> }): DownloadCallerResolver {
  const { fileTokens, callers } = options;
  return async (req, access) => {
    const token = extractToken(req, DOWNLOAD_SOURCES);
    if (token !== '' && fileTokens.isFileToken(token)) {
      const verified = fileTokens.verify(token);
      if (!verified) throw new UnauthorizedError('The file token is invalid or expired.', 'invalid_file_token');
      if (verified.scope !== 'all' && verified.scope !== access.scope) {
        throw new ForbiddenError(`This file token opens protected files only: ${access.what} needs a token from POST /api/files/token without "scope" (pb.files.getToken()).`);
      }
      return describeRequest(req, verified.identity);
    }
    return callers[access.hostToken](req);
  };
}
