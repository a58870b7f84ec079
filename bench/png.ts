/** PNG images without an image library: the bench needs one real picture and one 1 MiB upload. */
import { randomBytes } from 'node:crypto';
import { constants, createDeflate, deflateSync } from 'node:zlib';

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

function crc32(data: Buffer): number {
  let c = 0xffffffff;
  for (const byte of data) c = CRC_TABLE[(c ^ byte) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

function chunk(type: string, data: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'ascii');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])), 0);
  return Buffer.concat([head, data, crc]);
}

/**
 * An RGB PNG of `width` x `height`. `noise` fills it with random pixels, which deflate cannot
 * shrink, so the file is about width*height*3 bytes (a 600x600 noise image is just over 1 MiB);
 * otherwise it is a two-colour picture that compresses to a few KiB.
 */
export function makePng(width: number, height: number, options: { noise?: boolean } = {}): Buffer {
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header[8] = 8;
  header[9] = 2;
  const rows: Buffer[] = [];
  for (let y = 0; y < height; y++) {
    const row = options.noise ? randomBytes(1 + width * 3) : Buffer.alloc(1 + width * 3);
    row[0] = 0;
    if (!options.noise) for (let x = 0; x < width; x++) row[1 + x * 3 + (y < height / 2 ? 0 : 2)] = 255;
    rows.push(row);
  }
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', header),
    chunk('IDAT', deflateSync(Buffer.concat(rows))),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

/**
 * The same two-colour picture as `makePng`, made without holding the raw pixels: the deflate
 * stream is fed one reused row at a time, so a 6300x6300 image (119 MB of pixels, about 120 KB
 * of png) costs a few hundred KB of memory. Tests that measure memory or the event loop need
 * their own set-up not to leave hundreds of MB of garbage behind.
 */
export async function makeLargePng(width: number, height: number): Promise<Buffer> {
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header[8] = 8;
  header[9] = 2;
  const top = Buffer.alloc(1 + width * 3);
  const bottom = Buffer.alloc(1 + width * 3);
  for (let x = 0; x < width; x++) {
    top[1 + x * 3] = 255;
    bottom[1 + x * 3 + 2] = 255;
  }
  const deflate = createDeflate({ level: constants.Z_BEST_COMPRESSION });
  const compressed: Buffer[] = [];
  deflate.on('data', (chunk: Buffer) => compressed.push(chunk));
  const done = new Promise<void>((resolve, reject) => {
    deflate.on('end', resolve);
    deflate.on('error', reject);
  });
  for (let y = 0; y < height; y++) {
    if (!deflate.write(y < height / 2 ? top : bottom)) await new Promise((resolve) => deflate.once('drain', resolve));
  }
  deflate.end();
  await done;
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', header),
    chunk('IDAT', Buffer.concat(compressed)),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}
