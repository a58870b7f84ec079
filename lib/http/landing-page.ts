import type { RequestHandler } from 'express';
import { DASHBOARD_HEADERS } from './dashboard-routes.js';

/** What the page links to besides the API: the parts the options turned on. */
export interface LandingPageOptions {
  dashboard: boolean;
  openapi: boolean;
  /**
   * Mounted at the app's root (`app.use(records)`), `GET /` is the host's own page: the router
   * then passes it on (`'next'`) unless told to answer it (`recordbase serve`, whose app is only the router).
   */
  atAppRoot: 'next' | 'answer';
}

const HTML_ESCAPES: Readonly<Record<string, string>> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Text made safe to print in HTML: a mount path with parameters (`/:tenant`) is the caller's text. */
function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]!);
}

/** The page's body: what this is and where things are, as links relative to the mount. */
function renderLandingPage(mount: string, options: LandingPageOptions): string {
  const item = (href: string, text: string) => `<li><a href="${href}">${text}</a></li>`;
  const items = [
    item('api/health', 'Health check: api/health'),
    '<li>Records: api/collections/{collection}/records</li>',
    ...(options.dashboard ? [item('_/', 'Dashboard: _/ (for superusers)')] : []),
    ...(options.openapi ? [item('api/openapi.json', 'OpenAPI document: api/openapi.json')] : []),
  ];
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>recordbase</title></head>
<body>
<h1>recordbase</h1>
<p>A PocketBase-compatible records API, mounted at <code>${escapeHtml(mount)}</code>. Point the pocketbase SDK here.</p>
<ul>
${items.join('\n')}
</ul>
</body></html>
`;
}

/**
 * `GET {mount}/`: a small page instead of Express's "Cannot GET" (README, "Try it"). Text and
 * links only, under the dashboard's headers (no script runs). `{mount}` without its slash is
 * redirected to it, so the page's relative links stay below the mount whatever proxy prefix is in front.
 */
export function createLandingPage(options: LandingPageOptions): RequestHandler {
  return (req, res, next) => {
    if (req.baseUrl === '' && options.atAppRoot === 'next') {
      next();
      return;
    }
    const path = req.originalUrl.split('?')[0]!;
    if (!path.endsWith('/')) {
      res.redirect(308, `./${path.slice(path.lastIndexOf('/') + 1)}/`);
      return;
    }
    res.set(DASHBOARD_HEADERS).set('Cache-Control', 'no-cache').type('text/html; charset=utf-8').send(renderLandingPage(req.baseUrl || '/', options));
  };
}
