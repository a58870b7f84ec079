import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import type { CollectionDefinition } from '../../lib/index.js';
import { OPEN_RULES } from './open-rules.js';


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
      rules: { ...OPEN_RULES, create: 'code != "refuse"' },
      indexes: [{ fields: ['code'], unique: true }],
    },
    {
      name: 'gallery',
      fields: [{ name: 'photo', type: 'file', maxSelect: 1, thumbs: ['100x100', '0x50'] }],
      rules: OPEN_RULES,
    },
    {
      name: 'vault',
      fields: [
        { name: 'owner', type: 'text' },
        { name: 'scan', type: 'file', maxSelect: 1, protected: true },
        { name: 'note', type: 'file', maxSelect: 1 },
      ],
      rules: { ...OPEN_RULES, list: 'owner = @request.auth.id', view: 'owner = @request.auth.id' },
    },
    {
      name: 'sealed',
      fields: [{ name: 'scan', type: 'file', maxSelect: 1, protected: true }],
      rules: { ...OPEN_RULES, view: null },
    },
  ];
}

/** A stored name as createStoredFileName makes it, for a given stem and extension. */
export function storedNamePattern(stem: string, extension: string): RegExp {
  return new RegExp(`^${stem}_[a-z0-9]{10}\\.${extension}$`);
}

/**
 * A real RGB PNG whose top half is red and bottom half blue (so crops can be told apart), made
 * without an image library; shared with the benchmark, which needs the same pictures.
 */
export { makeLargePng, makePng } from '../../bench/png.js';

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
