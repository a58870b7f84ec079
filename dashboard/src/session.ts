/**
 * Where the dashboard's token lives. It is read from the PocketBase SDK's auth store on this
 * origin (`localStorage.pocketbase_auth`, `{"token": "...", "record": {...}}`) or typed into the
 * sign-in form, which keeps it for this tab only (sessionStorage). It is sent in the
 * Authorization header, never in a URL.
 */
const SDK_STORE = 'pocketbase_auth';
const TAB_STORE = 'recordbase_dashboard_token';

/** The token to try first: this tab's, else the SDK's; "" when there is none. */
export function readToken(): string {
  const typed = sessionStorage.getItem(TAB_STORE);
  if (typed) return typed;
  try {
    const stored = JSON.parse(localStorage.getItem(SDK_STORE) ?? 'null') as { token?: unknown } | null;
    return typeof stored?.token === 'string' ? stored.token : '';
  } catch {
    return '';
  }
}

/** Keeps a token typed into the form for this tab. */
export function keepToken(token: string): void {
  sessionStorage.setItem(TAB_STORE, token);
}

/** Signing out forgets the token everywhere the dashboard read it from, the SDK's store included. */
export function forgetToken(): void {
  sessionStorage.removeItem(TAB_STORE);
  localStorage.removeItem(SDK_STORE);
}
