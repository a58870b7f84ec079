import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { deflateSync } from 'node:zlib';
import type { CollectionDefinition } from '../../lib/index.js';

const OPEN = { list: '', view: '', create: '', update: '', delete: '' };

/**
 * The collections the file suites run against:
 * - `albums`: a public single image (`cover`, png/jpeg only, 200 KB, any thumb size), a
 *   multi-file field (`docs`, up to 5, any type), text/number/select/bool/json fields and a
 *   hidden field, so multipart coercion and clearing can be checked;
 * - `gallery`: `photo` limited to the thumb sizes 100x100 and 0x50;
 * - `vault`: a protected file whose view rule lets only the owner see it;
 * - `sealed`: a protected file with a `null` view rule (superusers only).
 */
export function fileCollections(): CollectionDefinition[] {
  return [
    {
      name: 'albums',
      id: 'pbc_albums01',
      fields: [
        { name: 'title', type: 'text', max: 100 },
        { name: 'views', type: 'number' },
        { name: 'published', type: 'bool' },
        { name: 'tags', type: 'select', values: ['a', 'b', 'c'], maxSelect: 3 },
        { name: 'meta', type: 'json' },
        { name: 'secret', type: 'text', hidden: true },
        { name: 'code', type: 'text' },
        { name: 'cover', type: 'file', maxSelect: 1, maxSize: 200_000, mimeTypes: ['image/png', 'image/jpeg'] },
        { name: 'docs', type: 'file', maxSelect: 5 },
      ],
      rules: { ...OPEN, create: 'code != "refuse"' },
      indexes: [{ fields: ['code'], unique: true }],
    },
    {
      name: 'gallery',
      fields: [{ name: 'photo', type: 'file', maxSelect: 1, thumbs: ['100x100', '0x50'] }],
      rules: OPEN,
    },
    {
      name: 'vault',
      fields: [
        { name: 'owner', type: 'text' },
        { name: 'scan', type: 'file', maxSelect: 1, protected: true },
        { name: 'note', type: 'file', maxSelect: 1 },
      ],
      rules: { ...OPEN, list: 'owner = @request.auth.id', view: 'owner = @request.auth.id' },
    },
    {
      name: 'sealed',
      fields: [{ name: 'scan', type: 'file', maxSelect: 1, protected: true }],
      rules: { ...OPEN, view: null },
    },
  ];
}

/** A stored name as createStoredFileName makes it, for a given stem and extension. */
export function storedNamePattern(stem: string, extension: string): RegExp {
  return new RegExp(`^${stem}_[a-z0-9]{10}\\.${extension}$`);
}

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

function crc32(bytes: Buffer): number {
  let c = 0xffffffff;
  for (const b of bytes) c = CRC_TABLE[(c ^ b) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

function pngChunk(type: string, data: Buffer): Buffer {
  const length = Buffer.alloc(4);
  length.writeUInt32BE(data.length);
  const body = Buffer.concat([Buffer.from(type, 'latin1'), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(body));
  return Buffer.concat([length, body, crc]);
}

/**
 * A real RGB PNG of `width` x `height` whose top half is red and bottom half blue (so crops can be
 * told apart), written by hand so that fixtures need no image library.
 */
export function makePng(width: number, height: number): Buffer {
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header[8] = 8; // bit depth
  header[9] = 2; // RGB
  const rows: Buffer[] = [];
  for (let y = 0; y < height; y++) {
    const row = Buffer.alloc(1 + width * 3);
    for (let x = 0; x < width; x++) {
      const top = y < height / 2;
      row[1 + x * 3] = top ? 255 : 0;
      row[3 + x * 3] = top ? 0 : 255;
    }
    rows.push(row);
  }
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    pngChunk('IHDR', header),
    pngChunk('IDAT', deflateSync(Buffer.concat(rows))),
    pngChunk('IEND', Buffer.alloc(0)),
  ]);
}

/** Every file under `root`, as relative paths, sorted; [] when the folder does not exist. */
export function listFilesUnder(root: string): string[] {
  if (!existsSync(root)) return [];
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      const full = path.join(dir, name);
      if (statSync(full).isDirectory()) walk(full);
      else out.push(path.relative(root, full));
    }
  };
  walk(root);
  return out.sort();
}

/** The bytes stored for a record's file in a test app's disk storage. */
export function readStoredFile(options: { dataDir: string; collectionId: string; recordId: string; name: string }): Buffer {
  return readFileSync(path.join(options.dataDir, 'storage', options.collectionId, options.recordId, options.name));
}
