/**
 * A WAL position (`pg_lsn`, written `16/B374D848`) as a bigint, so positions compare with `<`.
 * Undefined for anything else (a standby not in recovery answers NULL).
 */
export function parseWalPosition(text: unknown): bigint | undefined {
  if (typeof text !== 'string') return undefined;
  const match = /^([0-9A-Fa-f]{1,8})\/([0-9A-Fa-f]{1,8})$/.exec(text);
  if (!match) return undefined;
  return (BigInt(`0x${match[1]}`) << 32n) | BigInt(`0x${match[2]}`);
}
