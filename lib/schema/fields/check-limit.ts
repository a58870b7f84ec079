/**
 * Setting checks several field types share. A definition error is found when the router is
 * created, with a SchemaError naming the collection and field (`where`), rather than as every
 * write failing later.
 */
import { SchemaError } from '../../errors.js';

/** Refuses a limit that validation could not enforce (a negative length, a non-numeric bound). */
export function checkLimit(where: string, options: { name: string; value: unknown; integer: boolean }): void {
  const { value } = options;
  if (value === undefined) return;
  const ok = typeof value === 'number' && Number.isFinite(value) && (!options.integer || (Number.isInteger(value) && value >= 0));
  if (!ok) throw new SchemaError(`${where}: ${options.name} must be ${options.integer ? 'a non-negative integer' : 'a finite number'}`);
}

/** Refuses a `maxSelect` that is not a positive integer (select, relation and file fields). */
export function checkMaxSelect(where: string, maxSelect: unknown): void {
  if (maxSelect !== undefined && (!Number.isInteger(maxSelect) || (maxSelect as number) < 1)) {
    throw new SchemaError(`${where}: maxSelect must be a positive integer`);
  }
}
