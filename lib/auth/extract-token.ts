import type { Request } from 'express';

/**
 * Where a route looks for the caller's token (docs/configuration.md, "Tokens"). Record routes
 * read only the `Authorization` header: a cookie there would let any site make a logged-in
 * user's browser write records (a multipart POST is a CORS simple request). File downloads also
 * read the `pb_session` cookie and `?token=`, which is what lets an `<img>` or a link load a
 * protected file.
 */
export interface TokenSources {
  cookie: boolean;
  query: boolean;
}

/** Record routes and the file-token endpoint: the `Authorization` header only. */
export const HEADER_ONLY: TokenSources = { cookie: false, query: false };
/** File downloads: the header, then the `pb_session` cookie, then `?token=`. */
export const DOWNLOAD_SOURCES: TokenSources = { cookie: true, query: true };

/** Reads one cookie without a parser dependency; the value is URI-decoded when it can be. */
function readCookie(header: string | undefined, name: string): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0 || part.slice(0, eq).trim() !== name) continue;
    const raw = part.slice(eq + 1).trim().replace(/^"(.*)"$/, '$1');
    try {
      return decodeURIComponent(raw);
    } catch {
      return raw;
    }
  }
  return undefined;
}

/**
 * The caller's token: `Authorization: Bearer <t>` or the raw header the pocketbase SDK sends,
 * then, where `sources` allow, the `pb_session` cookie and `?token=`. Empty when none.
 */
export function extractToken(req: Request, sources: TokenSources): string {
  const header = req.headers.authorization?.trim();
  if (header) return /^bearer\s+/i.test(header) ? header.replace(/^bearer\s+/i, '').trim() : header;
  if (sources.cookie) {
    const cookie = readCookie(req.headers.cookie, 'pb_session');
    if (cookie) return cookie;
  }
  if (sources.query) {
    const token = req.query.token;
    if (typeof token === 'string' && token !== '') return token;
  }
  return '';
}
