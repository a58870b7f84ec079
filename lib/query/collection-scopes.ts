import { listOperandNames, type FilterNode } from './filter-ast.js';

/**
 * Where each `@collection` reference's EXISTS goes: the smallest node holding every reference
 * to that key, so all of them read one row (PocketBase shares one join per collection) while
 * an unrelated `||` branch is not swallowed by the EXISTS.
 */
export function findCollectionScopes(root: FilterNode): Map<FilterNode, string[]> {
  const scopes = new Map<FilterNode, string[]>();
  const totals = countCollectionRefs(root, new Map());
  const visit = (node: FilterNode): void => {
    const counts = countCollectionRefs(node, new Map());
    const children = node.type === 'comparison' ? [] : node.items;
    for (const [key, count] of counts) {
      if (count !== totals.get(key)) continue;
      const deeper = children.some((child) => countCollectionRefs(child, new Map()).get(key) === count);
      if (!deeper) scopes.set(node, [...(scopes.get(node) ?? []), key]);
    }
    children.forEach(visit);
  };
  visit(root);
  return scopes;
}

function countCollectionRefs(node: FilterNode, counts: Map<string, number>): Map<string, number> {
  if (node.type !== 'comparison') {
    for (const item of node.items) countCollectionRefs(item, counts);
    return counts;
  }
  for (const operand of [node.left, node.right].flatMap(listOperandNames)) {
    if (operand.segments[0] === '@collection' && operand.segments.length > 1) {
      const key = operand.segments[1];
      counts.set(key, (counts.get(key) ?? 0) + 1);
    }
  }
  return counts;
}
