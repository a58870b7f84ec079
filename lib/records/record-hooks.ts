import type { Identity } from '../auth/identity.js';
import type { RecordValues } from '../db/record-store.js';
import type { Logger } from '../logger.js';
import type { CollectionSchema } from '../schema/collection-schema.js';
import type { RecordsApi } from './records-api.js';

/** The collection a hook event is about. */
export interface HookCollection {
  readonly name: string;
  readonly id: string;
}

/** What every hook event carries. */
interface HookEventBase {
  readonly collection: HookCollection;
  /** Who is writing: the request's identity, the server API's `as` identity, or `null` for a guest. */
  readonly identity: Identity | null;
  /** The server API, bound to the write's transaction in before-hooks (after commit in after-hooks). */
  readonly api: RecordsApi;
}

/**
 * `beforeCreate`: the rule has passed, nothing is written yet. `data` is the normalised write
 * (field name -> the value it will store, plus `id` when the client chose one): change it and the
 * write stores the change, after validation.
 */
export interface BeforeCreateEvent extends HookEventBase {
  readonly data: Record<string, unknown>;
}

/** `beforeUpdate`: the rule has passed and the row is locked. `data` holds the fields the update changes. */
export interface BeforeUpdateEvent extends HookEventBase {
  readonly data: Record<string, unknown>;
  /** The record as it is stored now (read-only). */
  readonly record: Readonly<RecordValues>;
}

/** `beforeDelete`: the rule has passed (or a cascade reached the record) and nothing is deleted yet. */
export interface BeforeDeleteEvent extends HookEventBase {
  /** The record about to be deleted. */
  readonly record: Readonly<RecordValues>;
}

/** `afterCreate`, `afterUpdate`, `afterDelete`: the write is committed; `record` is as stored (or as it was, for a delete). */
export interface AfterWriteEvent extends HookEventBase {
  readonly record: Readonly<RecordValues>;
}

type HookResult = void | Promise<void>;

/**
 * The hooks of one collection (or of every collection, under `'*'`). Before-hooks run inside the
 * write's transaction after the rule check; throwing a `RecordbaseError` refuses the write with
 * its status and message, anything else is a 500; nothing is written either way. After-hooks run
 * once the write is committed; their errors are logged and never reach the client.
 */
export interface CollectionHooks {
  beforeCreate?(event: BeforeCreateEvent): HookResult;
  beforeUpdate?(event: BeforeUpdateEvent): HookResult;
  beforeDelete?(event: BeforeDeleteEvent): HookResult;
  afterCreate?(event: AfterWriteEvent): HookResult;
  afterUpdate?(event: AfterWriteEvent): HookResult;
  afterDelete?(event: AfterWriteEvent): HookResult;
}

/** The `hooks` option: per collection name, or `'*'` for every collection (those run first). */
export type RecordHooks = Record<string, CollectionHooks>;

const HOOK_NAMES = ['beforeCreate', 'beforeUpdate', 'beforeDelete', 'afterCreate', 'afterUpdate', 'afterDelete'] as const;
type HookName = (typeof HOOK_NAMES)[number];
type EventOf<N extends HookName> = Parameters<NonNullable<CollectionHooks[N]>>[0];

/**
 * Checks the `hooks` option when the options are resolved: keys must be `'*'` or a declared
 * collection (`isDeclared`, by name), and each value an object of known hook functions, so a
 * misspelt name fails at once instead of never running.
 */
export function checkHooks(hooks: unknown, isDeclared: (name: string) => boolean): RecordHooks {
  if (hooks === undefined) return {};
  if (hooks === null || typeof hooks !== 'object' || Array.isArray(hooks)) throw new TypeError('hooks must be an object of { <collection name or "*">: { beforeCreate, ... } }');
  for (const [key, value] of Object.entries(hooks)) {
    if (key !== '*' && !isDeclared(key)) throw new TypeError(`hooks: "${key}" is not a declared collection (nor "*")`);
    if (value === null || typeof value !== 'object') throw new TypeError(`hooks.${key} must be an object of hook functions`);
    for (const [name, fn] of Object.entries(value)) {
      if (!(HOOK_NAMES as readonly string[]).includes(name)) throw new TypeError(`hooks.${key}: unknown hook "${name}" (known: ${HOOK_NAMES.join(', ')})`);
      if (typeof fn !== 'function') throw new TypeError(`hooks.${key}.${name} must be a function`);
    }
  }
  return hooks as RecordHooks;
}

/**
 * Checks what a before-hook left in `data`: a hook may change values (and set `id` on create);
 * a key that is no writable field is a bug in the hook, and a silent no-op would hide it.
 */
export function checkHookData(collection: CollectionSchema, data: Record<string, unknown>, options: { hook: string; allowId: boolean }): void {
  for (const key of Object.keys(data)) {
    if (key === 'id' && options.allowId) continue;
    const field = collection.field(key);
    if (!field || field.system) throw new TypeError(`the ${options.hook} hook of "${collection.name}" set "${key}", which is not a writable field`);
  }
}

/** Runs the hooks of a collection: `'*'` first, then the collection's own. */
export class HookRunner {
  constructor(
    private readonly hooks: RecordHooks,
    private readonly logger: Logger,
  ) {}

  /** Whether `collection` has a hook of this name (the record service then needs a transaction for it). */
  has(collection: CollectionSchema, name: HookName): boolean {
    return this.listFor(collection, name).length > 0;
  }

  /** Runs the before-hooks of `name`; their errors propagate (they refuse the write). */
  async runBefore<N extends 'beforeCreate' | 'beforeUpdate' | 'beforeDelete'>(collection: CollectionSchema, name: N, event: EventOf<N>): Promise<void> {
    for (const hook of this.listFor(collection, name)) await (hook as (e: EventOf<N>) => HookResult)(event);
  }

  /** Runs the after-hooks of `name`; a failure is logged, never thrown (the write is committed). */
  async runAfter(collection: CollectionSchema, name: 'afterCreate' | 'afterUpdate' | 'afterDelete', event: AfterWriteEvent): Promise<void> {
    for (const hook of this.listFor(collection, name)) {
      try {
        await (hook as (e: AfterWriteEvent) => HookResult)(event);
      } catch (err) {
        this.logger.error(`the ${name} hook of "${collection.name}" failed (the write is committed)`, err);
      }
    }
  }

  private listFor(collection: CollectionSchema, name: HookName): ((event: never) => HookResult)[] {
    return [this.hooks['*']?.[name], this.hooks[collection.name]?.[name]].filter((hook): hook is (event: never) => HookResult => hook !== undefined);
  }
}
