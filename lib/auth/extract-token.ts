import type { Request } from 'express';

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
 * The caller's token (DESIGN.md section 6): `Authorization: Bearer <t>` or the raw header the
 * pocketbase SDK sends, then the `pb_session` cookie, then, where `allowQuery` (file routes
 * only, so tokens stay out of API URLs), `?token=`. Empty when none.
 */
export function extractToken(req: Request, options: { allowQuery: boolean }): string {
  const header = req.headers.authorization?.trim();
  if (header) return /^bearer\s+/i.test(header) ? header.replace(/^bearer\s+/i, '').trim() : header;
  const cookie = readCookie(req.headers.cookie, 'pb_session');
  if (cookie) return cookie;
  if (options.allowQuery) {
    const token = req.query.token;
    if (typeof token === 'string' && token !== '') return token;
  }
  return '';
}
