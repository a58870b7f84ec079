import { BlockList, isIP } from 'node:net';

/**
 * Who a rule counts (PocketBase's audiences): everyone (`''`), guests only (`'@guest'`) or
 * callers with an identity only (`'@auth'`, counted per identity).
 */
export type RateLimitAudience = '' | '@guest' | '@auth';

/**
 * One rule of `rateLimits.rules`, PocketBase's shape (docs/limits.md, "Rate limits"): at most
 * `maxRequests` requests per `duration` seconds for the requests its `label` names.
 */
export interface RateLimitRule {
  /** `/api/` (a path, a prefix when it ends in `/`), `POST /api/batch`, `posts:create` or `*:create`. */
  label: string;
  maxRequests: number;
  /** Seconds. */
  duration: number;
  audience: RateLimitAudience;
}

/** A rule as a host writes it: PocketBase's, whose `audience` may be left out (`''`: everyone). */
export type RateLimitRuleOption = Omit<RateLimitRule, 'audience'> & { audience?: RateLimitAudience };

/** `rateLimits` as given to createRecordsRouter (docs/configuration.md): each setting optional. */
export interface RateLimitOptions {
  rules?: RateLimitRuleOption[];
  excludedIps?: string[];
  maxTrackedKeys?: number;
}

/** `rateLimits` with its defaults filled in (lib/options.ts's table). */
export interface RateLimitSettings {
  /** None (the default): no rate limits, and no cost on any request. */
  rules: RateLimitRule[];
  /** Addresses and CIDR subnets never limited (PocketBase's `excludedIPs`): a health checker, the host's own jobs. */
  excludedIps: string[];
  /**
   * Counters one instance keeps in memory, and the most it writes to the shared table per rule and
   * window; beyond it the oldest are forgotten (docs/limits.md, "Rate limits").
   */
  maxTrackedKeys: number;
}

/** The actions a `collection:action` label may name: the records and files routes recordbase serves. */
export const RATE_LIMIT_ACTIONS = ['list', 'view', 'create', 'update', 'delete', 'file'] as const;
/** One of RATE_LIMIT_ACTIONS. */
export type RateLimitAction = (typeof RATE_LIMIT_ACTIONS)[number];

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];
/** PocketBase's path label: `/` then word characters, `/` and `-`. */
const PATH_LABEL = /^\/[\w/-]*$/;
const COLLECTION_LABEL = /^(\*|\w+):(\w+)$/;
const RULE_KEYS = ['label', 'maxRequests', 'duration', 'audience'];
/** A year: longer windows would outlive every deployment they limit. */
const MAX_DURATION_SECONDS = 366 * 24 * 60 * 60;

/**
 * Checks `rateLimits.rules` (PocketBase's validation, with recordbase's labels): each rule an
 * object with a label of a known form, positive whole `maxRequests` and `duration` (seconds) and
 * an audience of `''`, `'@guest'` or `'@auth'`; a `collection:action` label names a declared
 * collection (or `*`) and an action recordbase serves; two rules may not share a label and
 * audience, nor a label with one of them for everyone (PocketBase refuses these as conflicting:
 * which of them counts would depend on their order).
 */
export function checkRateLimitRules(path: string, value: unknown, isDeclared: (collection: string) => boolean): RateLimitRule[] {
  if (!Array.isArray(value)) throw new TypeError(`${path} must be an array of { label, maxRequests, duration, audience }`);
  const rules = value.map((item: unknown, index) => checkRule(`${path}[${index}]`, item, isDeclared));
  const seen = new Map<string, number>();
  rules.forEach((rule, index) => {
    for (const audience of rule.audience === '' ? ['', '@guest', '@auth'] : ['', rule.audience]) {
      const other = seen.get(`${rule.label}@@${audience}`);
      if (other !== undefined) throw new TypeError(`${path}[${index}] conflicts with ${path}[${other}]: both count ${JSON.stringify(rule.label)} for ${audience === '' || rule.audience === '' ? 'the same callers' : audience}`);
    }
    seen.set(`${rule.label}@@${rule.audience}`, index);
  });
  return rules;
}

function checkRule(path: string, item: unknown, isDeclared: (collection: string) => boolean): RateLimitRule {
  if (item === null || typeof item !== 'object' || Array.isArray(item)) throw new TypeError(`${path} must be an object { label, maxRequests, duration, audience }`);
  const unknown = Object.keys(item).find((key) => !RULE_KEYS.includes(key));
  if (unknown !== undefined) throw new TypeError(`${path}.${unknown} is not a setting of a rule (a rule takes ${RULE_KEYS.join(', ')})`);
  const { label, maxRequests, duration, audience = '' } = item as Record<string, unknown>;
  checkLabel(`${path}.label`, label, isDeclared);
  if (typeof maxRequests !== 'number' || !Number.isSafeInteger(maxRequests) || maxRequests <= 0) throw new TypeError(`${path}.maxRequests must be a positive integer`);
  if (typeof duration !== 'number' || !Number.isSafeInteger(duration) || duration <= 0 || duration > MAX_DURATION_SECONDS) {
    throw new TypeError(`${path}.duration must be a positive whole number of seconds, at most ${MAX_DURATION_SECONDS} (a year)`);
  }
  if (audience !== '' && audience !== '@guest' && audience !== '@auth') throw new TypeError(`${path}.audience must be "", "@guest" or "@auth", got ${JSON.stringify(audience)}`);
  return { label: label as string, maxRequests, duration, audience };
}

function checkLabel(path: string, label: unknown, isDeclared: (collection: string) => boolean): void {
  const forms = `a path (/api/, a prefix when it ends in /), a method and a path (POST /api/batch), collection:action or *:action (actions: ${RATE_LIMIT_ACTIONS.join(', ')})`;
  if (typeof label !== 'string') throw new TypeError(`${path} must be a string: ${forms}`);
  const space = label.indexOf(' ');
  if (space > 0 && METHODS.includes(label.slice(0, space)) && PATH_LABEL.test(label.slice(space + 1))) return;
  if (PATH_LABEL.test(label)) return;
  const named = COLLECTION_LABEL.exec(label);
  if (named) {
    const [, collection, action] = named;
    if (!(RATE_LIMIT_ACTIONS as readonly string[]).includes(action!)) {
      throw new TypeError(`${path} ${JSON.stringify(label)} names the action ${JSON.stringify(action)}, which recordbase does not serve (sign-in and its kin are the host's): use ${RATE_LIMIT_ACTIONS.join(', ')}`);
    }
    if (collection !== '*' && !isDeclared(collection!)) throw new TypeError(`${path} ${JSON.stringify(label)} names no declared collection`);
    return;
  }
  throw new TypeError(`${path} must be ${forms}, got ${JSON.stringify(label)}`);
}

/** Checks `rateLimits.excludedIps`: addresses (`10.0.0.7`, `::1`) and CIDR subnets (`10.0.0.0/8`, `fd00::/8`). */
export function checkExcludedIps(path: string, value: unknown): string[] {
  if (!Array.isArray(value)) throw new TypeError(`${path} must be an array of addresses and CIDR subnets`);
  value.forEach((item: unknown, index) => {
    if (typeof item !== 'string' || blockListOf([item]) === undefined) throw new TypeError(`${path}[${index}] must be an IP address or a CIDR subnet (10.0.0.0/8), got ${JSON.stringify(item)}`);
  });
  return value as string[];
}

/** The excluded addresses as Node's BlockList (IPv4 entries also match their IPv4-mapped IPv6 form); undefined for an entry that is neither. */
export function blockListOf(entries: readonly string[]): BlockList | undefined {
  const list = new BlockList();
  for (const entry of entries) {
    const [address = '', bits, extra] = entry.split('/');
    const family = isIP(address);
    if (family === 0 || extra !== undefined) return undefined;
    const type = family === 4 ? 'ipv4' : 'ipv6';
    if (bits === undefined) {
      list.addAddress(address, type);
      continue;
    }
    const prefix = /^\d{1,3}$/.test(bits) ? Number(bits) : -1;
    if (prefix < 0 || prefix > (family === 4 ? 32 : 128)) return undefined;
    list.addSubnet(address, prefix, type);
  }
  return list;
}
