import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Readable } from 'node:stream';
import { intToRGBA } from 'jimp';
import { diskStorage, type DiskStorage } from '../../lib/files/disk-storage.js';
import { buildFileKey } from '../../lib/files/file-names.js';
import type { Logger } from '../../lib/logger.js';
import {
  readImageDimensions,
  renderThumbnail,
  type ThumbnailBatchFunction,
  type ThumbnailBatchInput,
  type ThumbnailFunction,
  type ThumbnailInput,
} from '../../lib/files/render-thumbnail.js';
import { ThumbnailJimp } from '../../lib/files/thumbnail-jimp.js';
import { UnavailableError } from '../../lib/errors.js';
import { createThumbnailCache } from '../../lib/files/thumbnail-cache.js';
import { createThumbnailPool, type ThumbnailPool } from '../../lib/files/thumbnail-pool.js';
import type { ThumbnailSpec } from '../../lib/files/thumbnail-spec.js';
import type { Storage } from '../../lib/files/storage.js';
import { ensureBuilt } from '../support/built-package.js';

type ImageMime = 'image/png' | 'image/jpeg' | 'image/gif' | 'image/webp';

const RED = 0xff0000ff;
const BLUE = 0x0000ffff;

/** A width x height image whose top half is red and bottom half blue, so crops show in the colours. */
async function makeTwoToneImage(options: { width: number; height: number; mime: ImageMime }): Promise<Uint8Array> {
  const image = new ThumbnailJimp({ width: options.width, height: options.height, color: RED });
  const half = Math.floor(options.height / 2);
  image.scan(0, half, options.width, options.height - half, (_x, _y, index) => {
    image.bitmap.data.writeUInt32BE(BLUE, index);
  });
  return new Uint8Array(await image.getBuffer(options.mime));
}

/** Random pixels: compresses badly, so the encoder's quality setting shows in the size. */
async function makeNoiseImage(options: { width: number; height: number }): Promise<Uint8Array> {
  const image = new ThumbnailJimp({ width: options.width, height: options.height, color: 0 });
  let seed = 42;
  const data = image.bitmap.data;
  for (let i = 0; i < data.length; i += 4) {
    for (let c = 0; c < 3; c++) {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      data[i + c] = seed & 0xff;
    }
    data[i + 3] = 255;
  }
  return new Uint8Array(await image.getBuffer('image/png'));
}

async function decode(data: Uint8Array) {
  return ThumbnailJimp.fromBuffer(Buffer.from(data));
}

function readColour(image: Awaited<ReturnType<typeof decode>>, x: number, y: number): 'red' | 'blue' | 'other' {
  const { r, g, b } = intToRGBA(image.getPixelColor(x, y));
  if (r > 200 && g < 50 && b < 50) return 'red';
  if (b > 200 && r < 50 && g < 50) return 'blue';
  return 'other';
}

/** The format a file is in, by its first bytes. */
function sniffFormat(data: Uint8Array): 'png' | 'jpeg' | 'webp' | 'gif' | 'unknown' {
  const bytes = Buffer.from(data);
  if (bytes.subarray(0, 4).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47]))) return 'png';
  if (bytes.subarray(0, 3).equals(Buffer.from([0xff, 0xd8, 0xff]))) return 'jpeg';
  if (bytes.toString('latin1', 0, 4) === 'RIFF' && bytes.toString('latin1', 8, 12) === 'WEBP') return 'webp';
  if (bytes.toString('latin1', 0, 4) === 'GIF8') return 'gif';
  return 'unknown';
}

function makeSpec(width: number, height: number, extra: Partial<ThumbnailSpec> = {}): ThumbnailSpec {
  return { width, height, mode: 'top', ...extra };
}

let twoTonePng: Uint8Array;

beforeAll(async () => {
  // Small on purpose: under Jest's module sandbox jimp runs many times slower than in a worker.
  twoTonePng = await makeTwoToneImage({ width: 120, height: 80, mime: 'image/png' });
});

describe('renderThumbnail', () => {
  const sizes: Array<[label: string, spec: ThumbnailSpec, width: number, height: number]> = [
    ['WxH (top)', makeSpec(60, 60), 60, 60],
    ['center', makeSpec(60, 60, { mode: 'center' }), 60, 60],
    ['WxHb', makeSpec(60, 60, { mode: 'bottom' }), 60, 60],
    ['stretch', makeSpec(60, 60, { mode: 'stretch' }), 60, 60],
    ['stretch, other aspect', makeSpec(50, 120, { mode: 'stretch' }), 50, 120],
    ['WxHf', makeSpec(60, 60, { mode: 'fit' }), 60, 40],
    ['WxHf, rounding', makeSpec(50, 50, { mode: 'fit' }), 50, 33],
    ['WxHf, wide box', makeSpec(200, 30, { mode: 'fit' }), 45, 30],
    ['WxHf never enlarges', makeSpec(240, 240, { mode: 'fit' }), 120, 80],
    ['cover enlarges to the exact size (as PocketBase)', makeSpec(160, 160), 160, 160],
    ['tall box', makeSpec(10, 90), 10, 90],
    ['Wx0', makeSpec(60, 0), 60, 40],
    ['0xH', makeSpec(0, 20), 30, 20],
    ['Wx0 enlarging', makeSpec(240, 0), 240, 160],
    ['0x1', makeSpec(0, 1), 2, 1],
    ['1x1', makeSpec(1, 1), 1, 1],
    ['0xH ignores the mode', makeSpec(0, 20, { mode: 'stretch' }), 30, 20],
  ];

  test.each(sizes)('%s: %j -> %ix%i', async (_label, thumbnailSpec, width, height) => {
    const output = await renderThumbnail({ data: twoTonePng, mimeType: 'image/png', spec: thumbnailSpec });
    const image = await decode(output.data);
    expect([image.bitmap.width, image.bitmap.height]).toEqual([width, height]);
    expect(output.contentType).toBe('image/png');
  });

  test('crops anchor at the top by default, at the bottom with b, in the middle with center', async () => {
    const render = async (mode: ThumbnailSpec['mode']) =>
      decode((await renderThumbnail({ data: twoTonePng, mimeType: 'image/png', spec: makeSpec(60, 10, { mode }) })).data);
    const top = await render('top');
    const bottom = await render('bottom');
    const center = await render('center');
    const stretched = await render('stretch');
    for (const [x, y] of [[0, 0], [30, 5], [59, 9]] as const) {
      expect(readColour(top, x, y)).toBe('red');
      expect(readColour(bottom, x, y)).toBe('blue');
    }
    expect([readColour(center, 30, 1), readColour(center, 30, 8)]).toEqual(['red', 'blue']);
    expect([readColour(stretched, 30, 1), readColour(stretched, 30, 8)]).toEqual(['red', 'blue']);
  });

  test('a wider original is cropped evenly from both sides', async () => {
    // Left 20 columns green, middle 20 red, right 20 blue: a square crop keeps only the middle.
    const image = new ThumbnailJimp({ width: 60, height: 20, color: RED });
    image.scan(0, 0, 20, 20, (_x, _y, index) => image.bitmap.data.writeUInt32BE(0x00ff00ff, index));
    image.scan(40, 0, 20, 20, (_x, _y, index) => image.bitmap.data.writeUInt32BE(BLUE, index));
    const data = new Uint8Array(await image.getBuffer('image/png'));
    for (const mode of ['top', 'center', 'bottom'] as const) {
      const output = await decode((await renderThumbnail({ data, mimeType: 'image/png', spec: makeSpec(10, 10, { mode }) })).data);
      expect([readColour(output, 0, 0), readColour(output, 9, 9), readColour(output, 5, 5)]).toEqual(['red', 'red', 'red']);
    }
  });

  test('fit keeps the whole picture', async () => {
    const output = await decode((await renderThumbnail({ data: twoTonePng, mimeType: 'image/png', spec: makeSpec(30, 30, { mode: 'fit' }) })).data);
    expect([output.bitmap.width, output.bitmap.height]).toEqual([30, 20]);
    expect([readColour(output, 15, 1), readColour(output, 15, 18)]).toEqual(['red', 'blue']);
  });

  const formats: Array<[input: ImageMime, requested: ThumbnailSpec['format'], magic: string, contentType: string]> = [
    ['image/png', undefined, 'png', 'image/png'],
    ['image/jpeg', undefined, 'jpeg', 'image/jpeg'],
    ['image/webp', undefined, 'webp', 'image/webp'],
    ['image/gif', undefined, 'png', 'image/png'],
    ['image/png', 'webp', 'webp', 'image/webp'],
    ['image/png', 'jpeg', 'jpeg', 'image/jpeg'],
    ['image/jpeg', 'png', 'png', 'image/png'],
    ['image/gif', 'webp', 'webp', 'image/webp'],
    ['image/webp', 'jpeg', 'jpeg', 'image/jpeg'],
  ];
  test.each(formats)('%s with format %s -> %s', async (mimeType, format, magic, contentType) => {
    const data = await makeTwoToneImage({ width: 60, height: 40, mime: mimeType });
    expect(sniffFormat(data)).toBe(mimeType.slice('image/'.length));
    const output = await renderThumbnail({ data, mimeType, spec: makeSpec(20, 20, format ? { format } : {}) });
    expect(sniffFormat(output.data)).toBe(magic);
    expect(output.contentType).toBe(contentType);
    const image = await decode(output.data);
    expect([image.bitmap.width, image.bitmap.height]).toEqual([20, 20]);
    // A square crop of a wide original keeps its full height: red above, blue below, in every format.
    expect([readColour(image, 10, 3), readColour(image, 10, 16)]).toEqual(['red', 'blue']);
  });

  test('quality changes the size of jpeg and webp output', async () => {
    const data = await makeNoiseImage({ width: 100, height: 100 });
    const sizeAt = async (format: 'jpeg' | 'webp', quality: number) =>
      (await renderThumbnail({ data, mimeType: 'image/png', spec: makeSpec(100, 100, { format, quality }) })).data.byteLength;
    expect(await sizeAt('jpeg', 10)).toBeLessThan((await sizeAt('jpeg', 95)) * 0.6);
    expect(await sizeAt('webp', 10)).toBeLessThan((await sizeAt('webp', 95)) * 0.6);
    // The default is 80: between the two.
    const byDefault = (await renderThumbnail({ data, mimeType: 'image/png', spec: makeSpec(100, 100, { format: 'jpeg' }) })).data.byteLength;
    expect(byDefault).toBe(await sizeAt('jpeg', 80));
  });

  test('transparent areas become white in jpeg', async () => {
    const image = new ThumbnailJimp({ width: 20, height: 20, color: 0x00000000 });
    const data = new Uint8Array(await image.getBuffer('image/png'));
    const output = await decode((await renderThumbnail({ data, mimeType: 'image/png', spec: makeSpec(10, 10, { format: 'jpeg' }) })).data);
    const { r, g, b } = intToRGBA(output.getPixelColor(5, 5));
    expect(Math.min(r, g, b)).toBeGreaterThan(245);
  });

  test('readImageDimensions reads every supported header', async () => {
    for (const mime of ['image/png', 'image/jpeg', 'image/gif', 'image/webp'] as const) {
      expect(readImageDimensions(await makeTwoToneImage({ width: 31, height: 17, mime }))).toEqual({ width: 31, height: 17 });
    }
    const lossless = new ThumbnailJimp({ width: 7, height: 9, color: RED });
    expect(readImageDimensions(new Uint8Array(await lossless.getBuffer('image/webp')))).toEqual({ width: 7, height: 9 });
    expect(readImageDimensions(new Uint8Array([1, 2, 3]))).toBeUndefined();
    expect(readImageDimensions(new Uint8Array(Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"/>')))).toBeUndefined();
  });

  describe('refuses decompression bombs before decoding', () => {
    const png = Buffer.alloc(33);
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]).copy(png, 0);
    png.writeUInt32BE(13, 8);
    png.write('IHDR', 12, 'latin1');
    png.writeUInt32BE(100_000, 16);
    png.writeUInt32BE(100_000, 20);
    png.set([8, 6, 0, 0, 0], 24);

    // A gif whose screen is small but whose first frame claims 65535x65535.
    const gif = Buffer.concat([
      Buffer.from('GIF89a', 'latin1'),
      Buffer.from([10, 0, 10, 0, 0x00, 0, 0]),
      Buffer.from([0x21, 0xf9, 4, 0, 0, 0, 0, 0]),
      Buffer.from([0x2c, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0]),
      Buffer.from([2, 2, 0x4c, 0x01, 0, 0x3b]),
    ]);

    // SOI, an APP0 segment, then SOF0 claiming 60000x60000.
    const jpeg = Buffer.from([
      0xff, 0xd8, 0xff, 0xe0, 0, 16, 0x4a, 0x46, 0x49, 0x46, 0, 1, 1, 0, 0, 1, 0, 1, 0, 0,
      0xff, 0xc0, 0, 11, 8, 0xea, 0x60, 0xea, 0x60, 1, 1, 0x11, 0, 0xff, 0xd9,
    ]);

    const webp = Buffer.alloc(40);
    webp.write('RIFF', 0, 'latin1');
    webp.writeUInt32LE(32, 4);
    webp.write('WEBPVP8X', 8, 'latin1');
    webp.writeUInt32LE(10, 16);
    webp.writeUIntLE(16383, 24, 3);
    webp.writeUIntLE(16383, 27, 3);

    const bombs: Array<[ImageMime, Buffer, { width: number; height: number }]> = [
      ['image/png', png, { width: 100_000, height: 100_000 }],
      ['image/gif', gif, { width: 65535, height: 65535 }],
      ['image/jpeg', jpeg, { width: 60000, height: 60000 }],
      ['image/webp', webp, { width: 16384, height: 16384 }],
    ];
    test.each(bombs)('%s', async (mimeType, data, claimed) => {
      expect(readImageDimensions(data)).toEqual(claimed);
      await expect(renderThumbnail({ data, mimeType, spec: makeSpec(100, 100) })).rejects.toThrow('image too large for a thumbnail');
    });

    test('a proportional thumbnail of an extremely elongated image is refused', async () => {
      const strip = new ThumbnailJimp({ width: 4000, height: 1, color: RED });
      const data = new Uint8Array(await strip.getBuffer('image/png'));
      await expect(renderThumbnail({ data, mimeType: 'image/png', spec: makeSpec(0, 2048) })).rejects.toThrow('thumbnail too large');
      // A cover thumbnail of it is fine, and cheap: it crops to 1x1 before resizing (scaling
      // first, as jimp's cover does, would make a 256000x64 bitmap on the way).
      const cover = await decode((await renderThumbnail({ data, mimeType: 'image/png', spec: makeSpec(64, 64) })).data);
      expect([cover.bitmap.width, cover.bitmap.height, readColour(cover, 32, 32)]).toEqual([64, 64, 'red']);
    });
  });

  test('rejects corrupt, truncated and unknown data', async () => {
    const truncated = twoTonePng.slice(0, Math.floor(twoTonePng.length / 2));
    const garbageAfterHeader = Buffer.concat([Buffer.from(twoTonePng.slice(0, 33)), Buffer.alloc(200, 0x5a)]);
    const jpegish = Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xc0, 0, 11, 8, 0, 10, 0, 10, 1, 1, 0x11, 0]), Buffer.alloc(50, 0x33)]);
    const cases: Array<[Uint8Array, string]> = [
      [truncated, 'image/png'],
      [garbageAfterHeader, 'image/png'],
      [jpegish, 'image/jpeg'],
      [new Uint8Array(Buffer.from('not an image at all')), 'image/png'],
      [new Uint8Array(0), 'image/webp'],
      [twoTonePng, 'application/pdf'],
    ];
    for (const [data, mimeType] of cases) {
      await expect(renderThumbnail({ data, mimeType, spec: makeSpec(10, 10) })).rejects.toThrow(Error);
    }
  });
});

describe('createThumbnailPool', () => {
  const pools: ThumbnailPool[] = [];
  const createPool = (options: Parameters<typeof createThumbnailPool>[0]) => {
    const pool = createThumbnailPool(options);
    pools.push(pool);
    return pool;
  };

  beforeAll(async () => {
    await ensureBuilt();
  }, 180_000);

  afterAll(async () => {
    await Promise.all(pools.map((pool) => pool.close()));
  });

  test('rejects a size below 1', () => {
    expect(() => createThumbnailPool({ size: 0 })).toThrow(TypeError);
    expect(() => createThumbnailPool({ size: 1.5 })).toThrow(TypeError);
  });

  test('an idle worker is stopped after idleTimeoutMs, and the next job starts a fresh one', async () => {
    const pool = createPool({ size: 1, idleTimeoutMs: 50 });
    const first = await pool.render({ data: twoTonePng.slice(), mimeType: 'image/png', spec: makeSpec(20, 20) });
    await new Promise((resolve) => setTimeout(resolve, 300));
    const again = await pool.render({ data: twoTonePng.slice(), mimeType: 'image/png', spec: makeSpec(20, 20) });
    expect(Buffer.from(again.data)).toEqual(Buffer.from(first.data));
    // Jobs back to back keep their worker (the idle timer restarts after each).
    const results = await Promise.all([1, 2, 3].map(() => pool.render({ data: twoTonePng.slice(), mimeType: 'image/png', spec: makeSpec(20, 20) })));
    expect(results.map((r) => r.contentType)).toEqual(['image/png', 'image/png', 'image/png']);
  });

  test('gives the same result as renderThumbnail in-process', async () => {
    const pool = createPool({ size: 1 });
    for (const thumbnailSpec of [makeSpec(60, 60), makeSpec(50, 50, { mode: 'fit' }), makeSpec(0, 30, { format: 'webp' })]) {
      const inProcess = await renderThumbnail({ data: twoTonePng.slice(), mimeType: 'image/png', spec: thumbnailSpec });
      const pooled = await pool.render({ data: twoTonePng.slice(), mimeType: 'image/png', spec: thumbnailSpec });
      expect(pooled.contentType).toBe(inProcess.contentType);
      const [a, b] = [await decode(inProcess.data), await decode(pooled.data)];
      expect([b.bitmap.width, b.bitmap.height]).toEqual([a.bitmap.width, a.bitmap.height]);
      expect(Buffer.from(pooled.data).equals(Buffer.from(inProcess.data))).toBe(true);
    }
  }, 60_000);

  test('runs 8 concurrent jobs on 2 workers', async () => {
    const pool = createPool({ size: 2 });
    const jobs = Array.from({ length: 8 }, (_, i) =>
      pool.render({ data: twoTonePng.slice(), mimeType: 'image/png', spec: makeSpec(10 + i, 20, { mode: 'stretch' }) }),
    );
    const outputs = await Promise.all(jobs);
    for (const [i, output] of outputs.entries()) {
      const image = await decode(output.data);
      expect([image.bitmap.width, image.bitmap.height]).toEqual([10 + i, 20]);
    }
  }, 60_000);

  test('keeps the event loop responsive while it works', async () => {
    const pool = createPool({ size: 2 });
    // The 2000x2000 original is itself made by the pool: encoding it here would take long under Jest.
    const big = (await pool.render({ data: twoTonePng.slice(), mimeType: 'image/png', spec: makeSpec(2000, 2000, { mode: 'stretch' }) })).data;
    expect(readImageDimensions(big)).toEqual({ width: 2000, height: 2000 });
    const inputs: ThumbnailInput[] = [
      makeSpec(1024, 1024), makeSpec(800, 600, { mode: 'center' }), makeSpec(0, 1500), makeSpec(1200, 1200, { format: 'webp' }),
      makeSpec(2048, 2048, { mode: 'fit' }), makeSpec(640, 480, { format: 'jpeg' }),
    ].map((thumbnailSpec) => ({ data: big.slice(), mimeType: 'image/png', spec: thumbnailSpec }));
    const delay = monitorEventLoopDelay({ resolution: 10 });
    delay.enable();
    const outputs = await Promise.all(inputs.map((input) => pool.render(input)));
    delay.disable();
    expect(outputs.map((output) => sniffFormat(output.data))).toEqual(['png', 'png', 'png', 'webp', 'png', 'jpeg']);
    expect(outputs.map((output) => readImageDimensions(output.data))).toEqual([
      { width: 1024, height: 1024 }, { width: 800, height: 600 }, { width: 1500, height: 1500 },
      { width: 1200, height: 1200 }, { width: 2000, height: 2000 }, { width: 640, height: 480 },
    ]);
    expect(delay.max / 1e6).toBeLessThan(100);
  }, 120_000);

  test('a crashed worker fails its job only; the next job gets a fresh worker', async () => {
    const pool = createPool({ size: 1 });
    await expect(pool.render({ data: 'garbage' as unknown as Uint8Array, mimeType: 'image/png', spec: makeSpec(10, 10) })).rejects.toThrow(
      /thumbnail worker failed: malformed thumbnail job/,
    );
    const output = await pool.render({ data: twoTonePng.slice(), mimeType: 'image/png', spec: makeSpec(10, 10) });
    expect(sniffFormat(output.data)).toBe('png');
  }, 60_000);

  test('a render error rejects with its message and leaves the worker usable', async () => {
    const pool = createPool({ size: 1 });
    await expect(pool.render({ data: new Uint8Array(Buffer.from('nope')), mimeType: 'image/png', spec: makeSpec(10, 10) })).rejects.toThrow(
      'image dimensions unreadable',
    );
    const output = await pool.render({ data: twoTonePng.slice(), mimeType: 'image/png', spec: makeSpec(12, 12) });
    expect((await decode(output.data)).bitmap.width).toBe(12);
  }, 60_000);

  test('jobs over the time limit are rejected instead of waiting forever', async () => {
    const pool = createPool({ size: 1, jobTimeoutMs: 1 });
    const jobs = [1, 2, 3].map(() => pool.render({ data: twoTonePng.slice(), mimeType: 'image/png', spec: makeSpec(10, 10) }));
    // Each job's worker is terminated at the limit and the next job gets a new one.
    for (const job of jobs) await expect(job).rejects.toThrow(/exceeded 1 ms/);
  }, 60_000);

  test('close() rejects queued and running jobs, and later ones', async () => {
    const pool = createPool({ size: 1 });
    const jobs = Array.from({ length: 4 }, () => pool.render({ data: twoTonePng.slice(), mimeType: 'image/png', spec: makeSpec(50, 50) }));
    const settled = Promise.allSettled(jobs);
    await pool.close();
    const results = await settled;
    expect(results.map((result) => result.status)).toEqual(['rejected', 'rejected', 'rejected', 'rejected']);
    for (const result of results) expect(String((result as PromiseRejectedResult).reason)).toMatch(/closed/);
    await expect(pool.render({ data: twoTonePng.slice(), mimeType: 'image/png', spec: makeSpec(5, 5) })).rejects.toThrow(/closed/);
    await pool.close();
  }, 60_000);
});

describe('createThumbnailCache', () => {
  /** The cache takes resolved limits (the router passes its options'); each test overrides the one it tries. */
  const BOUNDS = { concurrency: 1, maxQueue: 100, maxPixels: 24_000_000, maxStoredPerFile: 10 };
  const collectionId = 'posts';
  const recordId = 'abcdefghij12345';
  let parent: string;
  let storage: DiskStorage;

  beforeAll(async () => {
    parent = await fs.mkdtemp(path.join(os.tmpdir(), 'rb-thumbnails-'));
    storage = diskStorage({ root: path.join(parent, 'storage'), fsync: false });
  });

  afterAll(async () => {
    await fs.rm(parent, { recursive: true, force: true });
  });

  /** A logger that keeps its lines for assertions. */
  function createMemoryLogger(): Logger & { warnings: string[] } {
    const warnings: string[] = [];
    return { warnings, warn: (message) => void warnings.push(message), error: () => undefined, info: () => undefined };
  }

  /** renderThumbnail, counting its calls. */
  function countRenders(): { render: ThumbnailFunction; calls: () => number } {
    let calls = 0;
    return {
      render: async (input) => {
        calls++;
        return renderThumbnail(input);
      },
      calls: () => calls,
    };
  }

  async function storeOriginal(name: string, data: Uint8Array): Promise<void> {
    await storage.write(buildFileKey({ collectionId, recordId, name }), Readable.from([Buffer.from(data)]));
  }

  async function readStored(key: string): Promise<Uint8Array> {
    const chunks: Buffer[] = [];
    for await (const chunk of await storage.read(key)) chunks.push(chunk as Buffer);
    return new Uint8Array(Buffer.concat(chunks));
  }

  test('makes the thumbnail once, stores it at the thumbnail key, then finds it in storage', async () => {
    const name = 'photo_aaaaaaaaaa.png';
    await storeOriginal(name, twoTonePng);
    const counter = countRenders();
    const cache = createThumbnailCache({ ...BOUNDS, storage, render: counter.render, logger: createMemoryLogger() });
    const request = { collectionId, recordId, name, mimeType: 'image/png', spec: makeSpec(100, 100) };

    const first = await cache.get(request);
    expect(first).toEqual({ key: `posts/${recordId}/thumbs_${name}/100x100_${name}`, contentType: 'image/png' });
    const stored = await decode(await readStored(first!.key));
    expect([stored.bitmap.width, stored.bitmap.height]).toEqual([100, 100]);

    // Found in storage: with the stat it made, so that serving it need not ask again.
    const found = { ...first, info: await storage.stat(first!.key) };
    expect(await cache.get(request)).toEqual(found);
    // A second cache on the same storage (another process, a restart) finds it too.
    const other = countRenders();
    expect(await createThumbnailCache({ ...BOUNDS, storage, render: other.render, logger: createMemoryLogger() }).get(request)).toEqual(found);
    expect([counter.calls(), other.calls()]).toEqual([1, 0]);

    const webp = await cache.get({ ...request, spec: makeSpec(100, 100, { mode: 'center', format: 'webp', quality: 50 }) });
    expect(webp).toEqual({ key: `posts/${recordId}/thumbs_${name}/100x100-center-q50-webp_${name}`, contentType: 'image/webp' });
    expect(sniffFormat(await readStored(webp!.key))).toBe('webp');
    expect(counter.calls()).toBe(2);
  });

  test('concurrent requests for one thumbnail share one render', async () => {
    const name = 'shared_bbbbbbbbbb.png';
    await storeOriginal(name, twoTonePng);
    const counter = countRenders();
    const cache = createThumbnailCache({ ...BOUNDS, storage, render: counter.render, logger: createMemoryLogger() });
    const request = { collectionId, recordId, name, mimeType: 'image/png', spec: makeSpec(0, 40) };
    const results = await Promise.all(Array.from({ length: 5 }, () => cache.get(request)));
    expect(counter.calls()).toBe(1);
    expect(new Set(results.map((result) => result?.key))).toEqual(new Set([`posts/${recordId}/thumbs_${name}/0x40_${name}`]));
    // Different specs of the same file are separate jobs.
    await Promise.all([cache.get({ ...request, spec: makeSpec(0, 41) }), cache.get({ ...request, spec: makeSpec(0, 42) })]);
    expect(counter.calls()).toBe(3);
  });

  test('serves the original (undefined) for types it does not thumbnail, without reading them', async () => {
    const counter = countRenders();
    const cache = createThumbnailCache({ ...BOUNDS, storage, render: counter.render, logger: createMemoryLogger() });
    for (const mimeType of ['application/pdf', 'image/svg+xml', 'text/plain']) {
      expect(await cache.get({ collectionId, recordId, name: 'doc_cccccccccc.pdf', mimeType, spec: makeSpec(100, 100) })).toBeUndefined();
    }
    expect(counter.calls()).toBe(0);
  });

  test('a corrupt image gives undefined and a warning, and nothing is stored', async () => {
    const name = 'broken_dddddddddd.png';
    await storeOriginal(name, new Uint8Array(Buffer.from('definitely not a png')));
    const logger = createMemoryLogger();
    const cache = createThumbnailCache({ ...BOUNDS, storage, render: renderThumbnail, logger });
    expect(await cache.get({ collectionId, recordId, name, mimeType: 'image/png', spec: makeSpec(100, 100) })).toBeUndefined();
    expect(logger.warnings).toHaveLength(1);
    // The collection, never the record's id or the file's name (issue 44: no id or file name in a log line).
    expect(logger.warnings[0]).toContain(`a thumbnail of a file of collection ${collectionId} not made`);
    expect(logger.warnings[0]).not.toContain(recordId);
    expect(logger.warnings[0]).not.toContain('broken_');
    expect(await storage.stat(`posts/${recordId}/thumbs_${name}/100x100_${name}`)).toBeUndefined();
  });

  test('an original over maxSourceBytes, or missing, gives undefined without rendering', async () => {
    const name = 'large_eeeeeeeeee.png';
    await storeOriginal(name, twoTonePng);
    const counter = countRenders();
    const cache = createThumbnailCache({ ...BOUNDS, storage, render: counter.render, logger: createMemoryLogger(), maxSourceBytes: twoTonePng.byteLength - 1 });
    expect(await cache.get({ collectionId, recordId, name, mimeType: 'image/png', spec: makeSpec(10, 10) })).toBeUndefined();
    expect(await cache.get({ collectionId, recordId, name: 'gone_ffffffffff.png', mimeType: 'image/png', spec: makeSpec(10, 10) })).toBeUndefined();
    expect(counter.calls()).toBe(0);
  });

  test('a storage failure propagates (the caller answers 500)', async () => {
    const name = 'photo_gggggggggg.png';
    await storeOriginal(name, twoTonePng);
    const failure = new Error('disk on fire');
    const failingWrites: Storage = { ...storage, write: async () => Promise.reject(failure), stat: (key) => storage.stat(key), read: (key, range) => storage.read(key, range) };
    const cache = createThumbnailCache({ ...BOUNDS, storage: failingWrites, render: renderThumbnail, logger: createMemoryLogger() });
    await expect(cache.get({ collectionId, recordId, name, mimeType: 'image/png', spec: makeSpec(10, 10) })).rejects.toBe(failure);
    const failingStat: Storage = { ...storage, stat: async () => Promise.reject(failure) };
    const cache2 = createThumbnailCache({ ...BOUNDS, storage: failingStat, render: renderThumbnail, logger: createMemoryLogger() });
    await expect(cache2.get({ collectionId, recordId, name, mimeType: 'image/png', spec: makeSpec(10, 10) })).rejects.toBe(failure);
  });

  test('works with the worker pool as its renderer', async () => {
    await ensureBuilt();
    const pool = createThumbnailPool({ size: 1 });
    try {
      const name = 'pooled_hhhhhhhhhh.jpg';
      await storeOriginal(name, await makeTwoToneImage({ width: 60, height: 40, mime: 'image/jpeg' }));
      const cache = createThumbnailCache({ ...BOUNDS, storage, render: pool.render, logger: createMemoryLogger() });
      const result = await cache.get({ collectionId, recordId, name, mimeType: 'image/jpeg', spec: makeSpec(30, 30, { mode: 'bottom' }) });
      expect(result).toEqual({ key: `posts/${recordId}/thumbs_${name}/30x30b_${name}`, contentType: 'image/jpeg' });
      const image = await decode(await readStored(result!.key));
      expect([image.bitmap.width, image.bitmap.height, readColour(image, 15, 15)]).toEqual([30, 30, 'blue']);
    } finally {
      await pool.close();
    }
  }, 180_000);

  /** A renderBatch that holds every batch until released, recording what it was given. */
  function createGatedRenderer() {
    const started: ThumbnailBatchInput[] = [];
    const gates: Array<() => void> = [];
    let running = 0;
    let maxRunning = 0;
    const renderBatch: ThumbnailBatchFunction = async (input) => {
      started.push({ ...input, specs: [...input.specs] });
      running++;
      maxRunning = Math.max(maxRunning, running);
      await new Promise<void>((resolve) => gates.push(resolve));
      running--;
      const results = [];
      for (const spec of input.specs) results.push({ output: await renderThumbnail({ data: input.data.slice(), mimeType: input.mimeType, spec }) });
      return results;
    };
    return {
      renderBatch,
      started,
      maxRunning: () => maxRunning,
      async releaseWhen(count: number) {
        await waitUntil(() => gates.length >= count);
        for (const gate of gates.splice(0)) gate();
      },
    };
  }

  async function waitUntil(condition: () => boolean): Promise<void> {
    for (let i = 0; i < 500 && !condition(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(condition()).toBe(true);
  }

  /** The storage, recording the keys read, and the keys whose stat has answered. */
  function countReads(inner: Storage): { storage: Storage; reads: string[]; statted: string[] } {
    const reads: string[] = [];
    const statted: string[] = [];
    return {
      reads,
      statted,
      storage: {
        write: (key, source, options) => inner.write(key, source, options),
        read: (key, range) => {
          reads.push(key);
          return inner.read(key, range);
        },
        stat: async (key) => {
          const info = await inner.stat(key);
          statted.push(key);
          return info;
        },
        delete: (key) => inner.delete(key),
        deletePrefix: (prefix) => inner.deletePrefix(prefix),
        list: (prefix) => inner.list(prefix),
      },
    };
  }

  test('sizes of one original asked together are made in one batch, from one decode', async () => {
    await ensureBuilt();
    const pool = createThumbnailPool({ size: 1 });
    try {
      const name = 'batch_iiiiiiiiii.png';
      await storeOriginal(name, twoTonePng);
      const batches: number[] = [];
      const renderBatch: ThumbnailBatchFunction = (input) => {
        batches.push(input.specs.length);
        return pool.renderBatch(input);
      };
      const cache = createThumbnailCache({ ...BOUNDS, storage, renderBatch, logger: createMemoryLogger() });
      const sizes = [[10, 10], [20, 0], [0, 30], [40, 40], [50, 20], [60, 60]] as const;
      const results = await Promise.all(sizes.map(([w, h]) => cache.get({ collectionId, recordId, name, mimeType: 'image/png', spec: makeSpec(w, h) })));
      // The first request starts alone; the five that arrive while it runs wait and go together.
      expect(batches.reduce((a, b) => a + b, 0)).toBe(6);
      expect(batches.length).toBeLessThanOrEqual(2);
      for (const [index, result] of results.entries()) {
        const image = await decode(await readStored(result!.key));
        const [w, h] = sizes[index]!;
        expect([image.bitmap.width, image.bitmap.height]).toEqual([w || Math.round((120 * h) / 80), h || Math.round((80 * w) / 120)]);
      }
    } finally {
      await pool.close();
    }
  }, 120_000);

  test('one batch per original at a time; waiting requests hold no original', async () => {
    for (const name of ['one_jjjjjjjjjj.png', 'two_kkkkkkkkkk.png']) await storeOriginal(name, twoTonePng);
    const gated = createGatedRenderer();
    const counted = countReads(storage);
    const cache = createThumbnailCache({ ...BOUNDS, storage: counted.storage, renderBatch: gated.renderBatch, logger: createMemoryLogger(), concurrency: 2 });
    const ask = (name: string, size: number) => cache.get({ collectionId, recordId, name, mimeType: 'image/png', spec: makeSpec(size, size) });
    const first = ask('one_jjjjjjjjjj.png', 11);
    await waitUntil(() => gated.started.length === 1);
    // Same original while its batch runs: waits (a slot is free, but the original is busy).
    const second = [ask('one_jjjjjjjjjj.png', 12), ask('one_jjjjjjjjjj.png', 13)];
    const other = ask('two_kkkkkkkkkk.png', 14);
    await waitUntil(() => gated.started.length === 2);
    expect(gated.started.map((input) => input.specs.map((spec) => spec.width))).toEqual([[11], [14]]);
    expect(counted.reads.filter((key) => !key.includes('/thumbs_'))).toHaveLength(2);
    await gated.releaseWhen(2);
    await Promise.all([first, other]);
    await waitUntil(() => gated.started.length === 3);
    // Both in one batch; their order is the order their storage checks answered in.
    expect(gated.started[2]!.specs.map((spec) => spec.width).sort()).toEqual([12, 13]);
    await gated.releaseWhen(1);
    expect((await Promise.all(second)).map((result) => result?.key.split('/').pop())).toEqual(['12x12_one_jjjjjjjjjj.png', '13x13_one_jjjjjjjjjj.png']);
    expect(gated.maxRunning()).toBe(2);
  }, 60_000);

  test('a full queue is a 503 thumbnail_queue_full; the queue drains and serves again', async () => {
    const names = ['q1_llllllllll.png', 'q2_mmmmmmmmmm.png', 'q3_nnnnnnnnnn.png', 'q4_oooooooooo.png'];
    for (const name of names) await storeOriginal(name, twoTonePng);
    const gated = createGatedRenderer();
    const counted = countReads(storage);
    const cache = createThumbnailCache({ ...BOUNDS, storage: counted.storage, renderBatch: gated.renderBatch, logger: createMemoryLogger(), concurrency: 1, maxQueue: 2 });
    const ask = (name: string) => cache.get({ collectionId, recordId, name, mimeType: 'image/png', spec: makeSpec(15, 15) });
    const running = ask(names[0]!);
    await waitUntil(() => gated.started.length === 1);
    const queued = [ask(names[1]!), ask(names[2]!)];
    // Each request checks storage before it queues; wait until both have queued.
    await waitUntil(() => counted.statted.filter((key) => key.includes('/thumbs_q2_') || key.includes('/thumbs_q3_')).length === 2);
    const refused = ask(names[3]!);
    await expect(refused).rejects.toBeInstanceOf(UnavailableError);
    await expect(refused).rejects.toMatchObject({ status: 503, code: 'thumbnail_queue_full', message: expect.stringContaining('limits.maxThumbnailQueue') });
    // The same thumbnail as a queued one shares its job instead of taking a place.
    const shared = ask(names[1]!);
    for (let i = 0; i < 3; i++) await gated.releaseWhen(1);
    expect((await Promise.all([running, ...queued, shared])).every((result) => result !== undefined)).toBe(true);
    const later = ask(names[3]!);
    await gated.releaseWhen(1);
    expect(await later).toBeDefined();
  }, 60_000);

  test('a file without listed sizes gets at most maxStoredPerFile thumbnails; then the original is served', async () => {
    const name = 'bounded_pppppppppp.png';
    await storeOriginal(name, twoTonePng);
    const counter = countRenders();
    const cache = createThumbnailCache({ ...BOUNDS, storage, render: counter.render, logger: createMemoryLogger(), maxStoredPerFile: 3 });
    const ask = (size: number, sizesListed = false) =>
      cache.get({ collectionId, recordId, name, mimeType: 'image/png', spec: makeSpec(size, size), sizesListed });
    for (const size of [21, 22, 23]) expect(await ask(size)).toBeDefined();
    expect(await ask(24)).toBeUndefined();
    // Concurrent new sizes are bounded too: they go in one batch, cut at the room left.
    expect(await Promise.all([ask(25), ask(26)])).toEqual([undefined, undefined]);
    expect(await ask(22)).toBeDefined(); // stored ones are still served
    const stored = [];
    for await (const object of storage.list(`posts/${recordId}/thumbs_${name}`)) stored.push(object.key.split('/').pop());
    expect(stored.sort()).toEqual([`21x21_${name}`, `22x22_${name}`, `23x23_${name}`]);
    expect(counter.calls()).toBe(3);
    // A field that lists its sizes is bounded by its list instead.
    expect(await ask(27, true)).toBeDefined();
  }, 60_000);

  test('the pixel budget refuses a larger original and lets renders decode no more than it at once', async () => {
    for (const name of ['px1_qqqqqqqqqq.png', 'px2_rrrrrrrrrr.png']) await storeOriginal(name, twoTonePng);
    const pixelsEach = 120 * 80;
    const logger = createMemoryLogger();
    const refusing = countRenders();
    const small = createThumbnailCache({ ...BOUNDS, storage, render: refusing.render, logger, maxPixels: pixelsEach - 1 });
    expect(await small.get({ collectionId, recordId, name: 'px1_qqqqqqqqqq.png', mimeType: 'image/png', spec: makeSpec(16, 16) })).toBeUndefined();
    expect(refusing.calls()).toBe(0);
    expect(logger.warnings.at(-1)).toContain('limits.maxThumbnailPixels');

    // Room for one original at a time: two slots, but the second render waits for the first.
    const gated = createGatedRenderer();
    const cache = createThumbnailCache({ ...BOUNDS, storage, renderBatch: gated.renderBatch, logger, concurrency: 2, maxPixels: pixelsEach + pixelsEach / 2 });
    const both = ['px1_qqqqqqqqqq.png', 'px2_rrrrrrrrrr.png'].map((name) =>
      cache.get({ collectionId, recordId, name, mimeType: 'image/png', spec: makeSpec(17, 17) }),
    );
    await gated.releaseWhen(1);
    await gated.releaseWhen(1);
    expect((await Promise.all(both)).every((result) => result !== undefined)).toBe(true);
    expect(gated.maxRunning()).toBe(1);
  }, 60_000);
});
