import { describe, expect, test } from '@jest/globals';
import { BadRequestError } from '../../../lib/errors.js';
import { buildThumbnailKey } from '../../../lib/files/file-names.js';
import {
  isThumbnailable,
  outputFormatFor,
  parseThumbnailRequest,
  thumbnailKeySpec,
  type ThumbnailFormat,
  type ThumbnailSpec,
} from '../../../lib/files/thumbnail-spec.js';

type Query = Parameters<typeof parseThumbnailRequest>[0];

/** Runs the parser and returns the thrown error's code, failing when nothing is thrown. */
function getRejectionCode(query: Query, allowedSizes?: readonly string[]): string {
  try {
    parseThumbnailRequest(query, { allowedSizes });
  } catch (error) {
    expect(error).toBeInstanceOf(BadRequestError);
    const badRequest = error as BadRequestError;
    expect(badRequest.status).toBe(400);
    expect(badRequest.message.length).toBeGreaterThan(10);
    return badRequest.code;
  }
  throw new Error(`expected ${JSON.stringify(query)} to be rejected`);
}

describe('parseThumbnailRequest: valid forms', () => {
  const cases: Array<[query: Query, expected: ThumbnailSpec]> = [
    [{ thumb: '100x100' }, { width: 100, height: 100, mode: 'top' }],
    [{ thumb: '100x100t' }, { width: 100, height: 100, mode: 'top' }],
    [{ thumb: '100x100b' }, { width: 100, height: 100, mode: 'bottom' }],
    [{ thumb: '100x100f' }, { width: 100, height: 100, mode: 'fit' }],
    [{ thumb: '100x100', center: true }, { width: 100, height: 100, mode: 'center' }],
    [{ thumb: '100x100', stretch: true }, { width: 100, height: 100, mode: 'stretch' }],
    [{ thumb: '100x100', center: false, stretch: false }, { width: 100, height: 100, mode: 'top' }],
    [{ thumb: '0x50' }, { width: 0, height: 50, mode: 'top' }],
    [{ thumb: '50x0' }, { width: 50, height: 0, mode: 'top' }],
    [{ thumb: '1x1' }, { width: 1, height: 1, mode: 'top' }],
    [{ thumb: '2048x2048' }, { width: 2048, height: 2048, mode: 'top' }],
    [{ thumb: '0x2048' }, { width: 0, height: 2048, mode: 'top' }],
    [{ thumb: '0100x0050' }, { width: 100, height: 50, mode: 'top' }],
    [{ thumb: '100x100', quality: '0' }, { width: 100, height: 100, mode: 'top', quality: 0 }],
    [{ thumb: '100x100', quality: '100' }, { width: 100, height: 100, mode: 'top', quality: 100 }],
    [{ thumb: '100x100', quality: '55' }, { width: 100, height: 100, mode: 'top', quality: 55 }],
    [{ thumb: '100x100', format: 'webp' }, { width: 100, height: 100, mode: 'top', format: 'webp' }],
    [{ thumb: '100x100', format: 'jpeg' }, { width: 100, height: 100, mode: 'top', format: 'jpeg' }],
    [{ thumb: '100x100', format: 'png' }, { width: 100, height: 100, mode: 'top', format: 'png' }],
    [
      { thumb: '320x240f', quality: '70', format: 'webp' },
      { width: 320, height: 240, mode: 'fit', quality: 70, format: 'webp' },
    ],
  ];

  test.each(cases)('%j', (query, expected) => {
    expect(parseThumbnailRequest(query, {})).toEqual(expected);
  });

  test('no thumb (absent or empty, as PocketBase) means no thumbnail, whatever else is given', () => {
    expect(parseThumbnailRequest({}, {})).toBeUndefined();
    expect(parseThumbnailRequest({ thumb: '' }, {})).toBeUndefined();
    expect(parseThumbnailRequest({ quality: '500', format: 'gif', center: true }, { allowedSizes: ['10x10'] })).toBeUndefined();
  });
});

describe('parseThumbnailRequest: 400 cases', () => {
  const malformed = [
    '100', 'x100', '100x', 'x', '100X100', '100*100', '100x100x100', ' 100x100', '100x100 ', '100 x100',
    '+100x100', '-1x100', '100x-1', '1.5x100', '100x1e2', '12345x1', '1x12345', '100x100c', '100x100tt',
    '100x100T', '100x100-', 'ax100', '100x100&center', '١٠٠x١٠٠', '100x100\n', '0x0t', 'abc',
  ];
  test.each(malformed)('thumb %j is invalid_thumb', (thumb) => {
    expect(getRejectionCode({ thumb })).toBe('invalid_thumb');
  });

  const invalidSizes = ['0x0', '2049x100', '100x2049', '9999x9999', '0x2049', '2049x0', '0000x0000'];
  test.each(invalidSizes)('size %j is invalid_thumb', (thumb) => {
    expect(getRejectionCode({ thumb })).toBe('invalid_thumb');
  });

  test('a repeated thumb parameter (an array) is invalid_thumb', () => {
    expect(getRejectionCode({ thumb: ['100x100', '50x50'] as unknown as string })).toBe('invalid_thumb');
  });

  const conflicts: Query[] = [
    { thumb: '100x100', center: true, stretch: true },
    { thumb: '100x100f', stretch: true },
    { thumb: '100x100t', center: true },
    { thumb: '100x100b', center: true },
  ];
  test.each(conflicts)('contradicting modes %j are invalid_thumb', (query) => {
    expect(getRejectionCode(query)).toBe('invalid_thumb');
  });

  const badQualities = ['', '-1', '101', '1000', '50.5', '5e1', ' 50', '50 ', 'abc', '+50', '0x10', '٥٠'];
  test.each(badQualities)('quality %j is invalid_thumb_quality', (quality) => {
    expect(getRejectionCode({ thumb: '100x100', quality })).toBe('invalid_thumb_quality');
  });

  const badFormats = ['', 'gif', 'jpg', 'WEBP', 'Png', 'avif', 'webp ', 'image/webp', 'bmp'];
  test.each(badFormats)('format %j is invalid_thumb_format', (format) => {
    expect(getRejectionCode({ thumb: '100x100', format })).toBe('invalid_thumb_format');
  });
});

describe('parseThumbnailRequest: allowedSizes', () => {
  const allowed = ['100x100', '0x50', '200x200t'];

  test('a listed size passes, compared as written', () => {
    expect(parseThumbnailRequest({ thumb: '100x100' }, { allowedSizes: allowed })).toEqual({ width: 100, height: 100, mode: 'top' });
    expect(parseThumbnailRequest({ thumb: '0x50' }, { allowedSizes: allowed })).toEqual({ width: 0, height: 50, mode: 'top' });
    expect(parseThumbnailRequest({ thumb: '200x200t' }, { allowedSizes: allowed })).toEqual({ width: 200, height: 200, mode: 'top' });
    expect(parseThumbnailRequest({ thumb: '100x100', center: true }, { allowedSizes: allowed })?.mode).toBe('center');
  });

  test.each(['100x100t', '100x100f', '200x200', '50x0', '0100x0100', '10x10'])('%j is not in the list: thumb_not_allowed', (thumb) => {
    expect(getRejectionCode({ thumb }, allowed)).toBe('thumb_not_allowed');
  });

  test('a malformed thumb is reported as malformed even with a list', () => {
    expect(getRejectionCode({ thumb: '100' }, allowed)).toBe('invalid_thumb');
    expect(getRejectionCode({ thumb: '3000x3000' }, ['3000x3000'])).toBe('invalid_thumb');
  });

  test('an empty list allows any valid size', () => {
    expect(parseThumbnailRequest({ thumb: '640x480b' }, { allowedSizes: [] })).toEqual({ width: 640, height: 480, mode: 'bottom' });
  });
});

describe('thumbnailKeySpec', () => {
  const KEY_SPEC = /^[0-9]{1,4}x[0-9]{1,4}[a-z0-9-]{0,40}$/;

  const examples: Array<[spec: ThumbnailSpec, output: ThumbnailFormat, key: string]> = [
    [{ width: 100, height: 100, mode: 'top' }, 'png', '100x100'],
    [{ width: 100, height: 100, mode: 'top' }, 'jpeg', '100x100'],
    [{ width: 100, height: 100, mode: 'bottom' }, 'png', '100x100b'],
    [{ width: 100, height: 100, mode: 'fit' }, 'png', '100x100f'],
    [{ width: 100, height: 100, mode: 'center' }, 'png', '100x100-center'],
    [{ width: 100, height: 100, mode: 'stretch' }, 'png', '100x100-stretch'],
    [{ width: 0, height: 50, mode: 'top' }, 'png', '0x50'],
    [{ width: 0, height: 50, mode: 'stretch' }, 'png', '0x50'],
    [{ width: 100, height: 100, mode: 'top', quality: 60 }, 'jpeg', '100x100-q60'],
    [{ width: 100, height: 100, mode: 'top', quality: 60 }, 'png', '100x100'],
    [{ width: 100, height: 100, mode: 'top', quality: 80 }, 'webp', '100x100'],
    [{ width: 100, height: 100, mode: 'top', format: 'webp' }, 'webp', '100x100-webp'],
    [{ width: 100, height: 100, mode: 'fit', quality: 0, format: 'jpeg' }, 'jpeg', '100x100f-q0-jpeg'],
  ];
  test.each(examples)('%j as %s -> %s', (spec, output, key) => {
    expect(thumbnailKeySpec(spec, output)).toBe(key);
  });

  /** Every spec over a grid of sizes, modes, qualities and formats. */
  function listSpecs(): ThumbnailSpec[] {
    const all: ThumbnailSpec[] = [];
    const sizes: Array<[number, number]> = [[100, 100], [100, 50], [50, 100], [0, 100], [100, 0], [2048, 2048], [1, 10], [11, 0], [10, 1]];
    for (const [width, height] of sizes) {
      for (const mode of ['top', 'center', 'bottom', 'fit', 'stretch'] as const) {
        for (const quality of [undefined, 0, 1, 10, 80, 99, 100]) {
          for (const format of [undefined, 'png', 'jpeg', 'webp'] as const) {
            all.push({ width, height, mode, ...(quality === undefined ? {} : { quality }), ...(format === undefined ? {} : { format }) });
          }
        }
      }
    }
    return all;
  }

  /** What the rendered image depends on; two requests with equal descriptions get equal bytes. */
  function describeImage(spec: ThumbnailSpec, output: ThumbnailFormat): string {
    const proportional = spec.width === 0 || spec.height === 0;
    const quality = output === 'png' ? 'lossless' : spec.quality ?? 80;
    return JSON.stringify([spec.width, spec.height, proportional ? 'any' : spec.mode, quality, output]);
  }

  // Keys sit under the original's file name, so the world to check is one original: its
  // default output format is fixed, and every request for it must map to its own image.
  test.each(['image/png', 'image/jpeg', 'image/webp', 'image/gif'])('for a %s original: valid, deterministic, and never shared by two different images', (originalMime) => {
    const imageByKey = new Map<string, string>();
    for (const spec of listSpecs()) {
      const output = outputFormatFor(spec, originalMime);
      const key = thumbnailKeySpec(spec, output);
      expect(key).toMatch(KEY_SPEC);
      expect(thumbnailKeySpec(JSON.parse(JSON.stringify(spec)) as ThumbnailSpec, output)).toBe(key);
      const image = describeImage(spec, output);
      const previous = imageByKey.get(key);
      if (previous !== undefined) expect(`${key}: ${image}`).toBe(`${key}: ${previous}`);
      imageByKey.set(key, image);
    }
    expect(imageByKey.size).toBeGreaterThan(200);
  });

  test('differs for every mode, size, quality and explicit format', () => {
    const base: ThumbnailSpec = { width: 100, height: 100, mode: 'top' };
    const variants: Array<[ThumbnailSpec, ThumbnailFormat]> = [
      [base, 'jpeg'],
      [{ ...base, mode: 'center' }, 'jpeg'],
      [{ ...base, mode: 'bottom' }, 'jpeg'],
      [{ ...base, mode: 'fit' }, 'jpeg'],
      [{ ...base, mode: 'stretch' }, 'jpeg'],
      [{ ...base, width: 101 }, 'jpeg'],
      [{ ...base, height: 0 }, 'jpeg'],
      [{ ...base, width: 0 }, 'jpeg'],
      [{ ...base, quality: 79 }, 'jpeg'],
      [{ ...base, quality: 81 }, 'jpeg'],
      [{ ...base, format: 'jpeg' }, 'jpeg'],
      [{ ...base, format: 'png' }, 'png'],
      [{ ...base, format: 'webp' }, 'webp'],
      [{ ...base, format: 'webp', quality: 50 }, 'webp'],
    ];
    const keys = variants.map(([spec, output]) => thumbnailKeySpec(spec, output));
    expect(new Set(keys).size).toBe(keys.length);
  });

  test('is accepted by buildThumbnailKey at its longest', () => {
    const key = thumbnailKeySpec({ width: 2048, height: 2048, mode: 'stretch', quality: 100, format: 'webp' }, 'webp');
    expect(key).toBe('2048x2048-stretch-q100-webp');
    expect(buildThumbnailKey({ collectionId: 'posts', recordId: 'abcdefghij12345', name: 'photo_abcdefghij.png', spec: key })).toBe(
      'posts/abcdefghij12345/thumbs_photo_abcdefghij.png/2048x2048-stretch-q100-webp_photo_abcdefghij.png',
    );
  });
});

describe('outputFormatFor', () => {
  const spec: ThumbnailSpec = { width: 10, height: 10, mode: 'top' };
  const cases: Array<[mime: string, format: ThumbnailFormat]> = [
    ['image/png', 'png'],
    ['image/jpeg', 'jpeg'],
    ['image/webp', 'webp'],
    ['image/gif', 'png'],
    ['IMAGE/JPEG', 'jpeg'],
    ['image/jpeg; charset=binary', 'jpeg'],
  ];
  test.each(cases)('%s -> %s by default', (mime, format) => {
    expect(outputFormatFor(spec, mime)).toBe(format);
  });

  test('the requested format wins', () => {
    expect(outputFormatFor({ ...spec, format: 'webp' }, 'image/png')).toBe('webp');
    expect(outputFormatFor({ ...spec, format: 'jpeg' }, 'image/gif')).toBe('jpeg');
    expect(outputFormatFor({ ...spec, format: 'png' }, 'image/jpeg')).toBe('png');
  });
});

describe('isThumbnailable', () => {
  test.each(['image/png', 'image/jpeg', 'image/gif', 'image/webp', 'Image/PNG', 'image/webp; x=y'])('%s: yes', (mime) => {
    expect(isThumbnailable(mime)).toBe(true);
  });
  test.each(['image/svg+xml', 'image/avif', 'image/bmp', 'image/tiff', 'application/pdf', 'video/mp4', 'text/html', ''])('%s: no', (mime) => {
    expect(isThumbnailable(mime)).toBe(false);
  });
});
