import { describe, expect, test } from '@jest/globals';
import {
  buildFileKey,
  buildRecordPrefix,
  buildThumbnailKey,
  buildThumbnailPrefix,
  createStoredFileName,
  isStoredFileName,
} from '../../../lib/files/file-names.js';
import { assertStorageKey, InvalidStorageKeyError } from '../../../lib/files/storage.js';

const SUFFIX = /_[a-z0-9]{10}/;

/** Splits a stored name into the sanitised stem and extension, checking the random suffix. */
function parse(stored: string): { stem: string; extension: string } {
  const match = /^(.*)_([a-z0-9]{10})(?:\.([a-z0-9]{1,20}))?$/.exec(stored);
  if (!match) throw new Error(`not a stored name: ${stored}`);
  return { stem: match[1]!, extension: match[3] ?? '' };
}

describe('createStoredFileName', () => {
  const cases: Array<[input: string, stem: string, extension: string]> = [
    ['photo.jpg', 'photo', 'jpg'],
    ['My Holiday Photo.JPEG', 'my_holiday_photo', 'jpeg'],
    ['../../etc/passwd', 'passwd', ''],
    ['/etc/passwd', 'passwd', ''],
    ['C:\\Windows\\x.exe', 'x', 'exe'],
    ['C:\\Windows\\System32\\..\\evil.dll', 'evil', 'dll'],
    ['dir/sub\\mixed/name.txt', 'name', 'txt'],
    ['.htaccess', 'htaccess', ''],
    ['.env.local', 'env', 'local'],
    ['a.PHP', 'a', 'php'],
    ['image.png.exe', 'image_png', 'exe'],
    ['archive.tar.gz', 'archive_tar', 'gz'],
    ['名前.jpg', 'file', 'jpg'],
    ['Ünïcödé file (1).JPG', 'unicode_file_1', 'jpg'],
    ['Straße Æsir Øre Łódź.png', 'strasse_aesir_ore_lodz', 'png'],
    ['ﬁle ＡＢＣ①.txt', 'file_abc1', 'txt'],
    ['...', 'file', ''],
    ['..', 'file', ''],
    ['.', 'file', ''],
    ['', 'file', ''],
    ['   ', 'file', ''],
    ['___', 'file', ''],
    ['a__b--c  d', 'a_b_c_d', ''],
    ['_leading and trailing_.md', 'leading_and_trailing', 'md'],
    ['evil\u0000.php.jpg', 'evil_php', 'jpg'],
    ['evil.php\u0000.jpg', 'evil_php', 'jpg'],
    ['invoice\u202egpj.exe', 'invoice_gpj', 'exe'],
    ['\u202e\u202d\u200b\ufeff.pdf', 'file', 'pdf'],
    ['report.final-v2', 'report_final_v2', ''],
    ['report.', 'report', ''],
    ['noext', 'noext', ''],
    ['trailing.dot.', 'trailing_dot', ''],
    ['UPPER.TXT', 'upper', 'txt'],
    ['x.123', 'x', '123'],
    [`a.${'b'.repeat(20)}`, 'a', 'b'.repeat(20)],
    [`a.${'b'.repeat(21)}`, `a_${'b'.repeat(21)}`, ''],
    ['a.tx t', 'a_tx_t', ''],
    ['a.tẍt', 'a_txt', ''],
    ['file\nname\r\t.txt', 'file_name', 'txt'],
    ['<script>alert(1)</script>.html', 'script', 'html'], // "</" is a folder separator
    ['<img src=x onerror=alert(1)>.svg', 'img_src_x_onerror_alert_1', 'svg'],
    ['%2e%2e%2fetc%2fpasswd', '2e_2e_2fetc_2fpasswd', ''],
    ['İstanbul.png', 'istanbul', 'png'],
  ];

  test.each(cases)('%j -> %s . %s', (input, stem, extension) => {
    const stored = createStoredFileName(input);
    expect(parse(stored)).toEqual({ stem, extension });
    expect(isStoredFileName(stored)).toBe(true);
  });

  test('long names keep at most 100 characters of stem, never ending in "_"', () => {
    const long = createStoredFileName(`${'a'.repeat(300)}.png`);
    expect(parse(long)).toEqual({ stem: 'a'.repeat(100), extension: 'png' });
    const cut = createStoredFileName(`${'a'.repeat(99)} b${'c'.repeat(200)}.txt`);
    expect(parse(cut).stem).toBe('a'.repeat(99)); // the cut lands on "_", which is trimmed
    const unicode = createStoredFileName('é'.repeat(300));
    expect(parse(unicode).stem).toBe('e'.repeat(100));
    for (const name of [long, cut, unicode]) {
      expect(name.length).toBeLessThanOrEqual(100 + 11 + 21);
      expect(isStoredFileName(name)).toBe(true);
    }
  });

  test('every result is a safe single path segment', () => {
    const hostile = ['../../etc/passwd', 'C:\\x', '..', '\u0000', 'a/b/../c', 'x'.repeat(5000), '\\\\server\\share\\f.txt'];
    for (const input of hostile) {
      const stored = createStoredFileName(input);
      expect(stored).toMatch(/^[a-z0-9_]+(\.[a-z0-9]+)?$/);
      expect(() => assertStorageKey(`c/r/${stored}`)).not.toThrow();
    }
  });

  test('the suffix is random', () => {
    const names = new Set(Array.from({ length: 200 }, () => createStoredFileName('same.png')));
    expect(names.size).toBe(200);
    for (const name of names) expect(name).toMatch(SUFFIX);
  });

  test('tolerates a non-string at runtime', () => {
    expect(parse(createStoredFileName(undefined as unknown as string))).toEqual({ stem: 'file', extension: '' });
  });
});

describe('isStoredFileName', () => {
  test.each([
    ['photo_abcdefghij.jpg', true],
    ['photo_abcdefghij', true],
    ['my_holiday_photo_0123456789.jpeg', true],
    ['file_0123456789.htaccess', true],
    [`${'a'.repeat(100)}_0123456789.png`, true],
    [`${'a'.repeat(101)}_0123456789.png`, false],
    [`a_0123456789.${'b'.repeat(20)}`, true],
    [`a_0123456789.${'b'.repeat(21)}`, false],
    ['photo.jpg', false],
    ['photo_abcdefghi.jpg', false],
    ['photo_abcdefghijk.jpg', false],
    ['Photo_abcdefghij.jpg', false],
    ['photo_ABCDEFGHIJ.jpg', false],
    ['photo_abcdefghij.JPG', false],
    ['_abcdefghij.jpg', false],
    ['a__b_abcdefghij.jpg', false],
    ['_a_abcdefghij.jpg', false],
    ['../photo_abcdefghij.jpg', false],
    ['x/photo_abcdefghij.jpg', false],
    ['photo_abcdefghij.jpg/..', false],
    ['photo_abcdefghij.tar.gz', false],
    ['photo_abcdefghij.', false],
    ['photo_abcdefghij.jpg\u0000', false],
    ['photo_abcdefghij.jpg\n', false],
    ['', false],
    [`${'a_'.repeat(5000)}!`, false],
  ])('%j -> %s', (name, expected) => {
    expect(isStoredFileName(name)).toBe(expected);
  });

  test('refuses non-strings', () => {
    for (const value of [undefined, null, 12, {}, ['photo_abcdefghij.jpg']]) expect(isStoredFileName(value)).toBe(false);
  });
});

describe('key builders', () => {
  const parts = { collectionId: 'pbc_3142635823', recordId: 'abcdefghij12345', name: 'photo_abcdefghij.png' };

  test('build the PocketBase layout', () => {
    expect(buildRecordPrefix(parts)).toBe('pbc_3142635823/abcdefghij12345');
    expect(buildFileKey(parts)).toBe('pbc_3142635823/abcdefghij12345/photo_abcdefghij.png');
    expect(buildThumbnailPrefix(parts)).toBe('pbc_3142635823/abcdefghij12345/thumbs_photo_abcdefghij.png');
    expect(buildThumbnailKey({ ...parts, spec: '100x100' })).toBe(
      'pbc_3142635823/abcdefghij12345/thumbs_photo_abcdefghij.png/100x100_photo_abcdefghij.png',
    );
    expect(buildThumbnailKey({ ...parts, spec: '0x50t' })).toMatch(/\/0x50t_photo_abcdefghij\.png$/);
    expect(buildThumbnailKey({ ...parts, spec: '100x100-center-q80-webp' })).toMatch(/\/100x100-center-q80-webp_photo/);
  });

  test('the keys pass the storage key check', () => {
    for (const key of [buildFileKey(parts), buildThumbnailKey({ ...parts, spec: '10x10f' }), buildRecordPrefix(parts)]) {
      expect(() => assertStorageKey(key)).not.toThrow();
    }
  });

  test.each([
    ['collectionId', '..'],
    ['collectionId', 'a/b'],
    ['collectionId', ''],
    ['collectionId', 'pbc posts'],
    ['collectionId', 'x'.repeat(64)],
    ['recordId', '../abcdefghij12'],
    // Any safe id (lib/schema/record-id.ts) names a record's folder; these are none.
    ['recordId', '..'],
    ['recordId', 'a.b'],
    ['recordId', 'a%2fb'],
    ['recordId', 'a\\b'],
    ['recordId', 'a\u0000b'],
    ['recordId', 'CON'],
    ['recordId', 'x'.repeat(101)],
    ['recordId', 'abcdefghij1234/'],
    ['name', '../../etc/passwd'],
    ['name', 'photo.png'],
    ['name', 'photo_abcdefghij.png/../x'],
    ['name', ''],
  ])('a bad %s (%j) is refused', (field, value) => {
    const bad = { ...parts, [field]: value };
    expect(() => buildFileKey(bad)).toThrow(InvalidStorageKeyError);
    expect(() => buildThumbnailKey({ ...bad, spec: '100x100' })).toThrow(InvalidStorageKeyError);
  });

  test('a provider id or a uuid names a record\'s folder like a default id', () => {
    for (const recordId of ['user_2NNEqL2nrIRdJ194ndJqAHwEfxC', '3f1c2a4e-9b7d-4c8e-a1f0-5d6e7b8c9a01']) {
      expect(buildFileKey({ ...parts, recordId })).toBe(`pbc_3142635823/${recordId}/photo_abcdefghij.png`);
    }
  });

  test.each(['', '100', 'x100', '100x', '100x100/..', '../100x100', '100X100', '12345x1', '100x100 ', '100x100_b', `1x1${'a'.repeat(41)}`])(
    'a bad thumbnail spec %j is refused',
    (spec) => {
      expect(() => buildThumbnailKey({ ...parts, spec })).toThrow(InvalidStorageKeyError);
    },
  );

  test('non-string parts are refused', () => {
    expect(() => buildFileKey({ ...parts, recordId: 123 as unknown as string })).toThrow(InvalidStorageKeyError);
    expect(() => buildFileKey({ ...parts, collectionId: null as unknown as string })).toThrow(InvalidStorageKeyError);
  });
});
