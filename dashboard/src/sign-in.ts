/** The sign-in form: recordbase issues no tokens; the host application's own sign-in does. */
import { useState } from 'preact/hooks';
import { html } from './html.js';

export function SignIn(props: { message: string; onToken: (token: string) => void }) {
  const [token, setToken] = useState('');
  const submit = (event: Event) => {
    event.preventDefault();
    if (token.trim() !== '') props.onToken(token.trim());
  };
  return html`<section class="sign-in" aria-labelledby="sign-in-title">
    <h2 id="sign-in-title">Sign in</h2>
    <p id="sign-in-help">
      The dashboard works with a superuser's token. recordbase does not issue tokens: your application's own sign-in does, and the
      token it gives is what the API's clients send. When the PocketBase SDK on this site is signed in, its token is used without asking.
    </p>
    ${props.message ? html`<p role="alert" class="error">${props.message}</p>` : null}
    <form onSubmit=${submit}>
      <label for="token">Token</label>
      <input id="token" type="password" autocomplete="off" aria-describedby="sign-in-help" value=${token} onInput=${(e: Event) => setToken((e.target as HTMLInputElement).value)} />
      <button type="submit" class="primary">Sign in</button>
    </form>
  </section>`;
}
