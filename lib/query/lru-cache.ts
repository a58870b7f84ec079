/**
 * A small least-recently-used cache. Parsing a filter is cheap but not free, and the same
 * filter strings (rules, a UI's list query) arrive over and over; a bounded cache keeps the hot
 * ones without letting a flood of distinct strings grow memory.
 */
export class LruCache<K, V> {
  private readonly entries = new Map<K, V>();

  /** `capacity` is the most entries kept; the least recently used one goes first. */
  constructor(private readonly capacity = 500) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new Error('LruCache capacity must be a positive integer');
  }

  /** The cached value, marking it most recently used. */
  get(key: K): V | undefined {
    if (!this.entries.has(key)) return undefined;
    const value = this.entries.get(key) as V;
    this.entries.delete(key);
    this.entries.set(key, value);
    return value;
  }

  /** Stores a value, evicting the least recently used entry when full. */
  set(key: K, value: V): void {
    this.entries.delete(key);
    this.entries.set(key, value);
    if (this.entries.size > this.capacity) {
      const oldest = this.entries.keys().next();
      if (!oldest.done) this.entries.delete(oldest.value);
    }
  }

  /** Whether a key is cached (does not refresh it). */
  has(key: K): boolean {
    return this.entries.has(key);
  }

  /** How many entries are cached. */
  get size(): number {
    return this.entries.size;
  }

  /** Drops every entry. */
  clear(): void {
    this.entries.clear();
  }
}

/**
 * One LruCache per owner object (a collection), made on first use and dropped with its owner:
 * for results that are only valid for the owner they were computed for.
 */
export class LruCachePerOwner<K, V> {
  private readonly caches = new WeakMap<object, LruCache<K, V>>();

  /** `capacity` is the most entries kept per owner. */
  constructor(private readonly capacity: number) {}

  get(owner: object, key: K): V | undefined {
    return this.caches.get(owner)?.get(key);
  }

  set(owner: object, key: K, value: V): void {
    let cache = this.caches.get(owner);
    if (!cache) this.caches.set(owner, (cache = new LruCache(this.capacity)));
    cache.set(key, value);
  }
}
