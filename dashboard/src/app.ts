/**
 * The dashboard's frame: the banner, the sign-in until a superuser's token is known, then the
 * collections sidebar and the records or schema view of the collection the URL's hash names
 * (`#/posts`, `#/posts/schema`).
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { Api, ApiError, findApiBase, type CollectionInfo } from './api.js';
import { html } from './html.js';
import { RecordsView } from './records-view.js';
import { SchemaView } from './schema-view.js';
import { forgetToken, keepToken, readToken } from './session.js';
import { SignIn } from './sign-in.js';
import { Sidebar } from './sidebar.js';

type Session =
  | { state: 'signed-out'; message: string }
  | { state: 'checking' }
  | { state: 'refused'; id: string }
  | { state: 'ready'; api: Api; collections: CollectionInfo[] };

/** The view the hash names. */
function readRoute(): { collection: string; schema: boolean } {
  const [name = '', view] = location.hash.replace(/^#\/?/, '').split('/');
  return { collection: decodeURIComponent(name), schema: view === 'schema' };
}

function useRoute() {
  const [route, setRoute] = useState(readRoute);
  useEffect(() => {
    const onChange = () => setRoute(readRoute());
    addEventListener('hashchange', onChange);
    return () => removeEventListener('hashchange', onChange);
  }, []);
  return route;
}

/** Checks a token: a superuser's opens the dashboard, anyone else's is refused, an unknown one asks again. */
async function checkToken(token: string): Promise<Session> {
  const api = new Api(findApiBase(), token);
  try {
    const me = await api.whoami();
    if (!me.superuser) return { state: 'refused', id: me.id };
    return { state: 'ready', api, collections: await api.collections() };
  } catch (err) {
    const message = err instanceof ApiError && err.status === 401 ? 'This token is not valid: the server does not know it.' : (err as Error).message;
    return { state: 'signed-out', message };
  }
}

/**
 * Where the focus goes once the user signed in or out, since the button that had it is gone: the
 * collection the URL names (else the first) in the sidebar, or Sign out where there is none; Sign
 * out for a token that is not a superuser's; the Token field for one the server refused, and
 * after signing out. The first selector that finds an element wins.
 */
const FOCUS_AFTER: Record<Exclude<Session['state'], 'checking'>, string[]> = {
  ready: ['.sidebar a[aria-current="page"]', '.sidebar a', '.banner button'],
  refused: ['.banner button'],
  'signed-out': ['#token'],
};

function focusFirst(selectors: string[]): void {
  for (const selector of selectors) {
    const found = document.querySelector<HTMLElement>(selector);
    if (found) {
      found.focus();
      return;
    }
  }
}

export function App() {
  const [session, setSession] = useState<Session>(() => (readToken() ? { state: 'checking' } : { state: 'signed-out', message: '' }));
  const [refresh, setRefresh] = useState(0);
  const route = useRoute();
  // Set by the user's own sign-in or sign-out; a token found in storage at load moves no focus.
  const moveFocus = useRef(false);

  useEffect(() => {
    if (session.state === 'checking') void checkToken(readToken()).then(setSession);
  }, []);
  useEffect(() => {
    if (!moveFocus.current || session.state === 'checking') return;
    moveFocus.current = false;
    focusFirst(FOCUS_AFTER[session.state]);
  }, [session]);

  const signIn = (token: string) => {
    keepToken(token);
    moveFocus.current = true;
    setSession({ state: 'checking' });
    void checkToken(token).then(setSession);
  };
  const signOut = () => {
    forgetToken();
    moveFocus.current = true;
    setSession({ state: 'signed-out', message: '' });
  };

  const signedIn = session.state === 'ready' || session.state === 'refused';
  return html`<div class=${`layout${session.state === 'ready' ? ' with-sidebar' : ''}`}>
    <header class="banner">
      <h1>recordbase</h1>
      ${signedIn ? html`<button type="button" onClick=${signOut}>Sign out</button>` : null}
    </header>
    ${session.state === 'ready' ? html`<${Sidebar} api=${session.api} collections=${session.collections} current=${route.collection} refresh=${refresh} />` : null}
    <main>${renderMain(session, route, signIn, () => setRefresh((n) => n + 1))}</main>
  </div>`;
}

function renderMain(session: Session, route: ReturnType<typeof readRoute>, signIn: (token: string) => void, onChanged: () => void) {
  switch (session.state) {
    case 'signed-out':
      return html`<${SignIn} message=${session.message} onToken=${signIn} />`;
    case 'checking':
      return html`<p role="status">Checking the token…</p>`;
    case 'refused':
      return html`<p role="alert" class="error">Signed in as ${session.id}, which is not a superuser: the dashboard shows records to superusers only.</p>`;
    case 'ready': {
      const collection = session.collections.find((c) => c.name === route.collection);
      if (!collection) return html`<p class="hint">${session.collections.length === 0 ? 'No collections are declared.' : 'Choose a collection.'}</p>`;
      const go = (hash: string) => () => (location.hash = hash);
      const name = encodeURIComponent(collection.name);
      if (route.schema) return html`<${SchemaView} collection=${collection} onBack=${go(`#/${name}`)} />`;
      return html`<${RecordsView}
        key=${collection.name}
        api=${session.api}
        collection=${collection}
        collections=${session.collections}
        onChanged=${onChanged}
        onShowSchema=${go(`#/${name}/schema`)}
      />`;
    }
  }
}
