/**
 * The filter language's macros (docs/query-language.md): `@now`, `@todayStart`, ... as instants,
 * and `@second` ... `@year` as numbers, all in UTC and all computed from one instant per
 * compilation, so a filter never sees two different "now"s.
 */

const DATE_MACROS = ['@now', '@todayStart', '@todayEnd', '@monthStart', '@monthEnd', '@yearStart', '@yearEnd', '@yesterday', '@tomorrow'];
const NUMBER_MACROS = ['@second', '@minute', '@hour', '@weekday', '@day', '@month', '@year'];
const DAY_MS = 86_400_000;

/** Whether `name` (with its `@`) is a macro. */
export function isMacroName(name: string): boolean {
  return DATE_MACROS.includes(name) || NUMBER_MACROS.includes(name);
}

/** The value of macro `name` at `now`: a Date for the date macros, a number for the others. */
export function computeMacro(name: string, now: Date): Date | number {
  const y = now.getUTCFullYear();
  const m = now.getUTCMonth();
  const d = now.getUTCDate();
  const todayStart = Date.UTC(y, m, d);
  switch (name) {
    case '@now':
      return new Date(now.getTime());
    case '@todayStart':
      return new Date(todayStart);
    case '@todayEnd':
      return new Date(todayStart + DAY_MS - 1);
    case '@monthStart':
      return new Date(Date.UTC(y, m, 1));
    case '@monthEnd':
      return new Date(Date.UTC(y, m + 1, 1) - 1);
    case '@yearStart':
      return new Date(Date.UTC(y, 0, 1));
    case '@yearEnd':
      return new Date(Date.UTC(y + 1, 0, 1) - 1);
    case '@yesterday':
      return new Date(now.getTime() - DAY_MS);
    case '@tomorrow':
      return new Date(now.getTime() + DAY_MS);
    case '@second':
      return now.getUTCSeconds();
    case '@minute':
      return now.getUTCMinutes();
    case '@hour':
      return now.getUTCHours();
    case '@weekday':
      return now.getUTCDay();
    case '@day':
      return d;
    case '@month':
      return m + 1;
    default:
      return y;
  }
}
