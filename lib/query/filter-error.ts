import { BadRequestError } from '../errors.js';

/**
 * Builds the one error every filter problem becomes, so messages share one shape
 * (`Invalid filter: <what> at position <n>.`) that a user can act on.
 */
export function createFilterError(what: string, pos?: number): BadRequestError {
  const where = pos === undefined ? '' : ` at position ${pos}`;
  return new BadRequestError(`Invalid filter: ${what}${where}.`, 'invalid_filter');
}

/** Quotes user text for a message, shortened so an error never echoes a whole 3,500-char filter. */
export function quoteForMessage(text: string): string {
  const short = text.length > 40 ? text.slice(0, 40) + '...' : text;
  return JSON.stringify(short);
}
