import { existsSync } from 'node:fs';
import { chromium, type Browser, type BrowserContext, type BrowserContextOptions, type Page } from 'playwright-core';

/** Debian's Chromium, which playwright-core drives (it downloads no browser of its own). */
export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/**
 * Whether the browser suites can run. Without CI a missing Chromium skips them with a visible
 * message; with CI=true it fails the run, because CI must prove the dashboard in a real browser
 * (.ci/run installs it).
 */
export function browserAvailable(): boolean {
  if (existsSync(CHROMIUM_PATH)) return true;
  if (process.env.CI === 'true') {
    throw new Error(`CI=true but no Chromium at ${CHROMIUM_PATH}: install Debian's chromium (see .ci/run)`);
  }
  console.warn(`\n*** No Chromium at ${CHROMIUM_PATH}: the browser suites are SKIPPED (apt-get install chromium). ***\n`);
  return false;
}

/** How long a page step (a click, a wait for an element) may take. */
const ACTION_TIMEOUT = 10_000;

/** Headless Chromium; `--no-sandbox` because tests run as root in CI. */
export function launchBrowser(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM_PATH, headless: true, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
}

/** The browser globals the init script uses (the project's TypeScript has no DOM library). */
declare const document: { addEventListener(type: 'securitypolicyviolation', listener: (event: { violatedDirective: string; blockedURI: string }) => void): void };
declare const window: { __reportCspViolation(text: string): void };

/** What a page did that a test may assert on: CSP violations, dialogs, console errors, request URLs. */
export interface PageWatch {
  readonly page: Page;
  readonly context: BrowserContext;
  /** `securitypolicyviolation` events (directive and blocked URI) and console messages about the CSP. */
  readonly cspViolations: string[];
  /** alert/confirm/prompt dialogs the page opened (each is dismissed). */
  readonly dialogs: string[];
  /** Console messages of type error. */
  readonly consoleErrors: string[];
  /** Every URL the page requested. */
  readonly requestUrls: string[];
  close(): Promise<void>;
}

/**
 * A fresh context and page that records what tests check: the page's own CSP reports (an init
 * script, which the CSP does not govern, listens to `securitypolicyviolation`), console errors,
 * dialogs and requests. The context never bypasses the CSP.
 */
export async function openWatchedPage(browser: Browser, options: BrowserContextOptions = {}): Promise<PageWatch> {
  const context = await browser.newContext({ ...options, bypassCSP: false });
  // A missing element fails the step with its selector well before Jest's own test timeout.
  context.setDefaultTimeout(ACTION_TIMEOUT);
  const cspViolations: string[] = [];
  const dialogs: string[] = [];
  const consoleErrors: string[] = [];
  const requestUrls: string[] = [];
  await context.exposeBinding('__reportCspViolation', (_source, text: string) => void cspViolations.push(text));
  await context.addInitScript(() => {
    document.addEventListener('securitypolicyviolation', (event) => {
      window.__reportCspViolation(`${event.violatedDirective} blocked ${event.blockedURI || '(inline)'}`);
    });
  });
  const page = await context.newPage();
  page.on('console', (message) => {
    if (/content security policy/i.test(message.text())) cspViolations.push(message.text());
    if (message.type() === 'error') consoleErrors.push(message.text());
  });
  page.on('dialog', (dialog) => {
    dialogs.push(`${dialog.type()}: ${dialog.message()}`);
    void dialog.dismiss().catch(() => undefined);
  });
  context.on('request', (request) => void requestUrls.push(request.url()));
  return { page, context, cspViolations, dialogs, consoleErrors, requestUrls, close: () => context.close() };
}

/** The relative luminance (0 black … 1 white) of a CSS `rgb()`/`rgba()` color. */
export function luminance(cssColor: string): number {
  const parts = cssColor.match(/[\d.]+/g)?.map(Number);
  if (!parts || parts.length < 3) throw new Error(`not an rgb() color: ${cssColor}`);
  const [r, g, b] = parts.slice(0, 3).map((c) => {
    const s = c / 255;
    return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
  });
  return 0.2126 * r! + 0.7152 * g! + 0.0722 * b!;
}

/**
 * Runs `check` until it stops throwing, or throws its last error after `timeoutMs`: how a test
 * waits for the page to reach a state (a wait, not a timing assertion).
 */
export async function eventually<T>(check: () => Promise<T> | T, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await check();
    } catch (err) {
      if (Date.now() > deadline) throw err;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
