/**
 * The ids a relation value holds, whatever its shape: a single relation stores one id (or `''`),
 * a multiple one an array. Empty and non-string entries are dropped.
 */
export function listRelationIds(value: unknown): string[] {
  if (Array.isArray(value)) return value.filter((v): v is string => typeof v === 'string' && v !== '');
  return typeof value === 'string' && value !== '' ? [value] : [];
}
