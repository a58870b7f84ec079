/**
 * The client a rate limit counts for an address (`req.ip`, as the host's `trust proxy` decided
 * it): an IPv4 address as it is (an IPv4-mapped IPv6 address as its IPv4 one), an IPv6 address as
 * its /64, the block one subscriber is given, so that rotating through the addresses of one's own
 * /64 does not escape a limit. Text that is no IP address is its own client; no address at all is
 * the one client `unknown`.
 */
export function addressGroup(ip: string | undefined): string {
  if (ip === undefined || ip === '') return 'unknown';
  if (!ip.includes(':')) return ip;
  if (ip.startsWith('::ffff:') && ip.includes('.')) return ip.slice(7);
  const groups = readIpv6Groups(ip);
  if (groups === undefined) return ip;
  if (groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff) return `${groups[6]! >> 8}.${groups[6]! & 255}.${groups[7]! >> 8}.${groups[7]! & 255}`;
  return `${groups.slice(0, 4).map((g) => g.toString(16)).join(':')}::/64`;
}

/** The eight 16-bit groups of an IPv6 address (`::` expanded, a zone dropped, a dotted IPv4 tail read), or undefined. */
function readIpv6Groups(text: string): number[] | undefined {
  const address = text.split('%')[0]!.toLowerCase();
  const halves = address.split('::');
  if (halves.length > 2) return undefined;
  const read = (part: string): number[] | undefined => {
    if (part === '') return [];
    const out: number[] = [];
    for (const piece of part.split(':')) {
      if (piece.includes('.')) {
        const bytes = piece.split('.').map(Number);
        if (bytes.length !== 4 || bytes.some((b) => !Number.isInteger(b) || b < 0 || b > 255)) return undefined;
        out.push((bytes[0]! << 8) | bytes[1]!, (bytes[2]! << 8) | bytes[3]!);
      } else if (/^[0-9a-f]{1,4}$/.test(piece)) out.push(parseInt(piece, 16));
      else return undefined;
    }
    return out;
  };
  const head = read(halves[0]!);
  const tail = halves.length === 2 ? read(halves[1]!) : [];
  if (head === undefined || tail === undefined) return undefined;
  const missing = 8 - head.length - tail.length;
  if (halves.length === 1 ? missing !== 0 : missing < 1) return undefined;
  return [...head, ...new Array<number>(missing).fill(0), ...tail];
}
