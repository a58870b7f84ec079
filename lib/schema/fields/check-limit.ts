/**
 * Setting checks several field types share. A definition error is found when the router is
 * created, with a SchemaError naming the collection and field (`where`), rather than as every
 * write failing later.
 */
import { SchemaError } from '../../errors.js';

/**
 * Refuses a limit that validation could not enforce (a negative length, a non-numeric bound).
 * `null` is no limit, as PocketBase's exports write an unset number bound.
 */
export function checkLimit(where: string, options: { name: string; value: unknown; integer: boolean }): void {
  const { value } = options;
  if (value === undefined || value === null) return;
  const ok = typeof value === 'number' && Number.isFinite(value) && (!options.integer || (Number.isInteger(value) && value >= 0));
  if (!ok) throw new SchemaError(`${where}: ${options.name} must be ${options.integer ? 'a non-negative integer' : 'a finite number'}`);
}

/**
 * Refuses a `maxSelect` that is not a non-negative integer (select, relation and file fields);
 * 0 and 1 both mean one value, as in PocketBase's exports.
 */
export function checkMaxSelect(where: string, maxSelect: unknown): void {
  if (maxSelect !== undefined && maxSelect !== null && (!Number.isInteger(maxSelect) || (maxSelect as number) < 0)) {
    throw new SchemaError(`${where}: maxSelect must be a non-negative integer (0 or 1: one value)`);
  }
}

/** Refuses a list setting that is not an array of strings; null is none, as PocketBase writes an empty list. */
export function checkStringList(where: string, options: { name: string; value: unknown }): readonly string[] {
  const { value } = options;
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value) || value.some((item) => typeof item !== 'string')) throw new SchemaError(`${where}: ${options.name} must be an array of strings`);
  return value as string[];
}
