/** Expand nesting beyond this depth is cut (docs/query-language.md). */
export const MAX_EXPAND_DEPTH = 6;
/** Most comma-separated paths read from `expand`; the rest are ignored. */
export const MAX_EXPAND_PATHS = 100;

/** Relation names to expand, each with what to expand inside it. */
export type ExpandTree = Map<string, ExpandTree>;

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * Parses the `expand` parameter into a tree of relation names. Schema resolution and execution
 * happen in lib/records; here the input is only bounded (paths, depth) and normalised (duplicates
 * merged, empty segments dropped), so no parameter can make expansion blow up. Segments that
 * cannot be names are dropped (with what follows them), like unknown names later.
 */
export function parseExpand(param: string | undefined | null): ExpandTree {
  const root: ExpandTree = new Map();
  if (typeof param !== 'string') return root;
  for (const entry of param.split(',').slice(0, MAX_EXPAND_PATHS)) {
    let node = root;
    const segments = entry
      .split('.')
      .map((s) => s.trim())
      .filter((s) => s !== '');
    for (const segment of segments.slice(0, MAX_EXPAND_DEPTH)) {
      if (!NAME.test(segment)) break;
      let child = node.get(segment);
      if (!child) {
        child = new Map();
        node.set(segment, child);
      }
      node = child;
    }
  }
  return root;
}
