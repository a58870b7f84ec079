/**
 * What email and url share: a text value (`""` when empty) that must satisfy an ajv format when
 * not empty, with the type's own wording when it does not, and PocketBase's `onlyDomains` /
 * `exceptDomains` on the value's domain.
 */
import { SchemaError, type FieldError } from '../../errors.js';
import { coerceText, readSingle } from '../coerce-value.js';
import { SINGLE_VALUE_ONLY, withoutUnset, type FieldBase, type FieldTypeSpec, type TypedFieldDefinition } from '../field-type-spec.js';
import { checkStringList } from './check-limit.js';

/** A declaration with PocketBase's domain lists (email, url). */
export interface DomainListsDefinition extends FieldBase {
  /** The value's domain must be one of these (exactly: a subdomain is another domain). */
  onlyDomains?: string[];
  /** The value's domain must not be one of these. Set one list or the other, not both. */
  exceptDomains?: string[];
}

/** A host name: labels of letters, digits and `-`, as DNS (and the URL parser) writes them. */
const HOST_NAME = /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/;

/**
 * A domain in the one form both sides of the comparison take: lower case, international names in
 * their ASCII (punycode) form, no final dot (`Example.COM.` is `example.com`). Undefined for what
 * is not a host name.
 */
export function normalizeDomain(domain: string): string | undefined {
  let host: string;
  try {
    host = new URL(`http://${domain}/`).hostname;
  } catch {
    return undefined;
  }
  // The parser keeps a final dot, which names the same host (and would slip past exceptDomains).
  if (host.endsWith('.')) host = host.slice(0, -1);
  return HOST_NAME.test(host) || /^\[[0-9a-f:.]+\]$/.test(host) ? host : undefined;
}

/** Checks the domain lists: arrays of host names, and not both set (PocketBase's rule). */
export function checkDomainLists(def: DomainListsDefinition, where: string): void {
  const only = checkStringList(where, { name: 'onlyDomains', value: def.onlyDomains });
  const except = checkStringList(where, { name: 'exceptDomains', value: def.exceptDomains });
  if (only.length > 0 && except.length > 0) throw new SchemaError(`${where}: set onlyDomains or exceptDomains, not both`);
  for (const domain of [...only, ...except]) {
    // A port, path or user part would be dropped by the parser and the rest compared: refuse them.
    if (normalizeDomain(domain) === undefined || /[/@?#\s]/.test(domain) || (domain.includes(':') && !domain.startsWith('['))) {
      throw new SchemaError(`${where}: ${JSON.stringify(domain)} is not a domain name`);
    }
  }
}

/** The declaration with its domain lists in the normalised form (and empty lists left out). */
export function normalizeDomainLists<D extends DomainListsDefinition & TypedFieldDefinition>(def: D): D {
  const out = withoutUnset(def, ['onlyDomains', 'exceptDomains'] as (keyof D & string)[]);
  if (out.onlyDomains !== undefined) out.onlyDomains = out.onlyDomains.map((d) => normalizeDomain(d)!);
  if (out.exceptDomains !== undefined) out.exceptDomains = out.exceptDomains.map((d) => normalizeDomain(d)!);
  return out;
}

/** Whether a value's domain passes the lists; an unreadable domain passes none of them. */
export function isDomainAllowed(def: DomainListsDefinition, domain: string): boolean {
  if (def.onlyDomains === undefined && def.exceptDomains === undefined) return true;
  const normalized = normalizeDomain(domain);
  if (normalized === undefined) return false;
  if (def.onlyDomains !== undefined && !def.onlyDomains.includes(normalized)) return false;
  return def.exceptDomains === undefined || !def.exceptDomains.includes(normalized);
}

/** The domain lists as a sentence for a schema's description, or "". */
export function describeDomainLists(def: DomainListsDefinition): string {
  if (def.onlyDomains !== undefined) return ` Domains allowed: ${def.onlyDomains.join(', ')}.`;
  if (def.exceptDomains !== undefined) return ` Domains refused: ${def.exceptDomains.join(', ')}.`;
  return '';
}

/** The parts of a formatted text type's spec (spread into defineFieldType). */
export function describeFormattedText<D extends TypedFieldDefinition>(options: {
  /** The ajv format's name. */
  format: string;
  /** Whether a non-empty value has the format. */
  test: (value: string) => boolean;
  /** What a value without the format answers. */
  error: FieldError;
}): Pick<FieldTypeSpec<D>, 'storage' | 'formats' | 'messages' | 'coerce' | 'constraints'> {
  return {
    storage: 'text',
    formats: { [options.format]: options.test },
    messages: { format: () => ({ ...options.error }) },
    coerce: (_field, raw) => readSingle(raw, SINGLE_VALUE_ONLY, coerceText),
    constraints: () => ({ type: 'string', format: options.format }),
  };
}
