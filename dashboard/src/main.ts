/** The dashboard's entry point (docs/dashboard.md): renders the app into the page. */
import { render } from 'preact';
import { App } from './app.js';
import { html } from './html.js';

render(html`<${App} />`, document.body);
