/** `html` tagged templates render Preact elements; values are always text or properties, never parsed as HTML. */
import { h } from 'preact';
import htm from 'htm';

export const html = htm.bind(h);
