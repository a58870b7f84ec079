import type { CountedRule } from './rate-limiter.js';

/** A matched rule, and whether it was matched through a `collection:action` label (it then counts per collection). */
export interface RuleMatch {
  readonly rule: CountedRule;
  readonly perCollection: boolean;
}

/**
 * PocketBase's choice among the rules (core/settings_model.go, FindRateLimitRule): one rule per
 * request, the first that matches the request's labels taken in order (`posts:create`,
 * `*:create`, `POST /api/collections/posts/records`, `/api/collections/posts/records`); for each
 * label an exact label first, then a path prefix (a label ending in `/`) in the rules' order;
 * only rules of the caller's audiences (`''` and `'@guest'` for a guest, `''` and `'@auth'` for
 * an identity).
 */
export class RateLimitRuleMatcher {
  private readonly exact = new Map<string, CountedRule[]>();
  private readonly prefixes: CountedRule[];

  constructor(rules: readonly CountedRule[]) {
    for (const rule of rules) {
      const list = this.exact.get(rule.label) ?? [];
      list.push(rule);
      this.exact.set(rule.label, list);
    }
    this.prefixes = rules.filter((rule) => rule.label.endsWith('/'));
  }

  /** The rule for `labels` (the first `collectionLabels` of them are `collection:action` ones) and a caller with or without an identity. */
  find(labels: readonly string[], options: { authenticated: boolean; collectionLabels: number }): RuleMatch | undefined {
    const other = options.authenticated ? '@guest' : '@auth';
    for (let i = 0; i < labels.length; i++) {
      const label = labels[i]!;
      const exact = this.exact.get(label);
      if (exact) for (const rule of exact) if (rule.audience !== other) return { rule, perCollection: i < options.collectionLabels };
      if (this.prefixes.length === 0) continue;
      const withSlash = `${label}/`;
      for (const rule of this.prefixes) if (rule.audience !== other && withSlash.startsWith(rule.label)) return { rule, perCollection: i < options.collectionLabels };
    }
    return undefined;
  }
}
