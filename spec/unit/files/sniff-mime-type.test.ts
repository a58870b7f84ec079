import { describe, expect, test } from '@jest/globals';
import { lookupContentType, MIME_SNIFF_LENGTH, sniffMimeType } from '../../../lib/files/sniff-mime-type.js';

/** Builds a buffer from a mix of byte arrays and latin1 strings, as file headers are written down. */
function bytes(...parts: Array<number[] | string | Buffer>): Buffer {
  return Buffer.concat(parts.map((part) => (typeof part === 'string' ? Buffer.from(part, 'latin1') : Buffer.from(part))));
}

const u32be = (n: number): number[] => [(n >>> 24) & 0xff, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff];
const u32le = (n: number): number[] => u32be(n).reverse();
const u16le = (n: number): number[] => [n & 0xff, (n >>> 8) & 0xff];
const zeros = (n: number): number[] => new Array<number>(n).fill(0);

/** An ISO-BMFF `ftyp` box with a major brand and compatible brands. */
function ftyp(major: string, ...compatible: string[]): Buffer {
  const body = bytes(major, zeros(4), ...compatible);
  return bytes(u32be(8 + body.length), 'ftyp', [...body], zeros(8));
}

/** A zip local file header for `name` followed by `content` (stored, uncompressed). */
function zipEntry(name: string, content = ''): Buffer {
  return bytes('PK', [3, 4], u16le(20), u16le(0), u16le(0), zeros(8), u32le(content.length), u32le(content.length), u16le(name.length), u16le(0), name, content);
}

const PNG = bytes([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], u32be(13), 'IHDR', u32be(1), u32be(1), [8, 6, 0, 0, 0]);
const JPEG = bytes([0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10], 'JFIF', [0, 1, 1, 0, 0, 1, 0, 1, 0, 0]);
const EBML_HEAD = [0x1a, 0x45, 0xdf, 0xa3, 0x9f, 0x42, 0x86, 0x81, 0x01, 0x42, 0xf7, 0x81, 0x01, 0x42, 0xf2, 0x81, 0x04, 0x42, 0xf3, 0x81, 0x08];
const OGG_PAGE = (packet: string): Buffer => bytes('OggS', [0, 2], zeros(8), u32le(1), u32le(0), u32le(0), [1, packet.length], packet);

describe('sniffMimeType: binary signatures', () => {
  const cases: Array<[label: string, head: Buffer, mime: string]> = [
    ['png', PNG, 'image/png'],
    ['jpeg (JFIF)', JPEG, 'image/jpeg'],
    ['jpeg (Exif)', bytes([0xff, 0xd8, 0xff, 0xe1, 0x00, 0x18], 'Exif', [0, 0]), 'image/jpeg'],
    ['gif87a', bytes('GIF87a', [1, 0, 1, 0, 0x80, 0, 0]), 'image/gif'],
    ['gif89a', bytes('GIF89a', [1, 0, 1, 0, 0x80, 0, 0]), 'image/gif'],
    ['webp', bytes('RIFF', u32le(26), 'WEBPVP8 ', u32le(14)), 'image/webp'],
    ['bmp', bytes('BM', u32le(70), zeros(4), u32le(54), u32le(40), u32le(1), u32le(1)), 'image/bmp'],
    ['ico', bytes([0, 0, 1, 0, 1, 0, 16, 16, 0, 0, 1, 0, 32, 0], u32le(40), u32le(22)), 'image/x-icon'],
    ['cur', bytes([0, 0, 2, 0, 1, 0, 16, 16, 0, 0, 1, 0, 32, 0], u32le(40), u32le(22)), 'image/x-icon'],
    ['tiff little-endian', bytes('II', [0x2a, 0], u32le(8)), 'image/tiff'],
    ['tiff big-endian', bytes('MM', [0, 0x2a], u32be(8)), 'image/tiff'],
    ['avif', ftyp('avif', 'avif', 'mif1', 'miaf'), 'image/avif'],
    ['avif behind mif1', ftyp('mif1', 'mif1', 'avif', 'miaf'), 'image/avif'],
    ['heic', ftyp('heic', 'mif1', 'heic'), 'image/heic'],
    ['heic behind mif1', ftyp('mif1', 'mif1', 'heic'), 'image/heic'],
    ['heif', ftyp('mif1', 'mif1'), 'image/heif'],
    ['mp4 (isom)', ftyp('isom', 'isom', 'iso2', 'avc1', 'mp41'), 'video/mp4'],
    ['mp4 (mp42)', ftyp('mp42', 'mp42', 'isom'), 'video/mp4'],
    ['mov (ftyp qt)', ftyp('qt  ', 'qt  '), 'video/quicktime'],
    ['mov (bare moov atom)', bytes(u32be(0x100), 'moov', u32be(0x6c), 'mvhd'), 'video/quicktime'],
    ['mov (bare mdat atom)', bytes(u32be(0x2000), 'mdat', zeros(16)), 'video/quicktime'],
    ['m4a', ftyp('M4A ', 'M4A ', 'mp42', 'isom'), 'audio/x-m4a'],
    ['3gp', ftyp('3gp4', '3gp4', 'isom'), 'video/3gpp'],
    ['webm', bytes(EBML_HEAD, [0x42, 0x82, 0x84], 'webm', [0x42, 0x87, 0x81, 0x04]), 'video/webm'],
    ['mkv', bytes(EBML_HEAD, [0x42, 0x82, 0x88], 'matroska', [0x42, 0x87, 0x81, 0x04]), 'video/x-matroska'],
    ['ogg vorbis', OGG_PAGE('\x01vorbis\x00\x00\x00\x00\x02'), 'audio/ogg'],
    ['ogg opus', OGG_PAGE('OpusHead\x01\x02'), 'audio/ogg'],
    ['ogg theora', OGG_PAGE('\x80theora\x03\x02'), 'video/ogg'],
    ['ogg other', OGG_PAGE('\x00unknown!!'), 'application/ogg'],
    ['wav', bytes('RIFF', u32le(36), 'WAVEfmt ', u32le(16), u16le(1), u16le(2)), 'audio/wav'],
    ['avi', bytes('RIFF', u32le(36), 'AVI LIST'), 'video/x-msvideo'],
    ['flac', bytes('fLaC', [0, 0, 0, 0x22], zeros(34)), 'audio/flac'],
    ['mp3 with ID3', bytes('ID3', [4, 0, 0], [0, 0, 0x10, 0]), 'audio/mpeg'],
    ['mp3 frame (MPEG-1 layer III)', bytes([0xff, 0xfb, 0x90, 0x64], zeros(32)), 'audio/mpeg'],
    ['mp3 frame (MPEG-2 layer III)', bytes([0xff, 0xf3, 0x64, 0xc4], zeros(32)), 'audio/mpeg'],
    ['aac adts', bytes([0xff, 0xf1, 0x50, 0x80, 0x02, 0x1f, 0xfc]), 'audio/aac'],
    ['aiff', bytes('FORM', u32be(100), 'AIFFCOMM'), 'audio/aiff'],
    ['midi', bytes('MThd', u32be(6), [0, 1, 0, 2]), 'audio/midi'],
    ['pdf', bytes('%PDF-1.7\n%', [0xe2, 0xe3, 0xcf, 0xd3], '\n1 0 obj'), 'application/pdf'],
    ['zip', bytes(zipEntry('hello.txt', 'hello')), 'application/zip'],
    ['empty zip', bytes('PK', [5, 6], zeros(18)), 'application/zip'],
    ['docx', bytes(zipEntry('[Content_Types].xml', '<Types/>'), zipEntry('word/document.xml')), 'application/vnd.openxmlformats-officedocument.wordprocessingml.document'],
    ['xlsx', bytes(zipEntry('[Content_Types].xml', '<Types/>'), zipEntry('xl/workbook.xml')), 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet'],
    ['pptx', bytes(zipEntry('_rels/.rels', '<x/>'), zipEntry('ppt/presentation.xml')), 'application/vnd.openxmlformats-officedocument.presentationml.presentation'],
    ['epub', bytes(zipEntry('mimetype', 'application/epub+zip'), zipEntry('META-INF/container.xml')), 'application/epub+zip'],
    ['odt', bytes(zipEntry('mimetype', 'application/vnd.oasis.opendocument.text'), zipEntry('content.xml')), 'application/vnd.oasis.opendocument.text'],
    ['gzip', bytes([0x1f, 0x8b, 0x08, 0x00], zeros(6)), 'application/gzip'],
    ['bzip2', bytes('BZh91AY&SY'), 'application/x-bzip2'],
    ['xz', bytes([0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00, 0x00, 0x04]), 'application/x-xz'],
    ['zstd', bytes([0x28, 0xb5, 0x2f, 0xfd, 0x24, 0x05]), 'application/zstd'],
    ['7z', bytes([0x37, 0x7a, 0xbc, 0xaf, 0x27, 0x1c, 0x00, 0x04]), 'application/x-7z-compressed'],
    ['rar', bytes('Rar!', [0x1a, 0x07, 0x01, 0x00]), 'application/x-rar-compressed'],
    ['tar', bytes('hello.txt', zeros(248), 'ustar\x0000', zeros(100)), 'application/x-tar'],
    ['sqlite', bytes('SQLite format 3\x00', [0x10, 0x00]), 'application/vnd.sqlite3'],
    ['wasm', bytes('\x00asm', [1, 0, 0, 0]), 'application/wasm'],
    ['elf', bytes('\x7fELF', [2, 1, 1, 0], zeros(8)), 'application/x-elf'],
    ['windows exe', bytes('MZ', [0x90, 0, 3, 0, 0, 0, 4, 0, 0, 0, 0xff, 0xff, 0, 0], zeros(46), u32le(0x80)), 'application/vnd.microsoft.portable-executable'],
    ['woff2', bytes('wOF2', u32be(0x10000)), 'font/woff2'],
    ['ttf', bytes([0, 1, 0, 0, 0, 0x0e, 0, 0x80]), 'font/ttf'],
    ['psd', bytes('8BPS', [0, 1], zeros(6)), 'image/vnd.adobe.photoshop'],
    ['rtf', bytes('{\\rtf1\\ansi\\deff0 {\\fonttbl}}'), 'application/rtf'],
  ];

  test.each(cases)('%s', (_label, head, mime) => {
    expect(sniffMimeType(head)).toBe(mime);
  });

  test('looks only at the first MIME_SNIFF_LENGTH bytes, and works on a Uint8Array view', () => {
    const big = Buffer.concat([PNG, Buffer.alloc(100_000, 0)]);
    expect(sniffMimeType(big)).toBe('image/png');
    const text = Buffer.concat([Buffer.alloc(MIME_SNIFF_LENGTH, 'a'), Buffer.from([0, 0, 0])]);
    expect(sniffMimeType(text)).toBe('text/plain');
    const pool = Buffer.concat([Buffer.from('junk'), JPEG]);
    expect(sniffMimeType(new Uint8Array(pool.buffer, pool.byteOffset + 4, JPEG.length))).toBe('image/jpeg');
  });

  test('truncated signatures do not throw', () => {
    for (const head of [PNG, JPEG, ftyp('avif'), zipEntry('mimetype', 'application/epub+zip'), OGG_PAGE('\x01vorbis')]) {
      for (let length = 0; length <= head.length; length++) {
        expect(typeof sniffMimeType(head.subarray(0, length))).toBe('string');
      }
    }
  });

  test('random bytes are application/octet-stream', () => {
    expect(sniffMimeType(bytes([0x00, 0x13, 0x37, 0xbe, 0xef, 0x00, 0xc3, 0x28]))).toBe('application/octet-stream');
    expect(sniffMimeType(bytes([0xc3, 0x28, 0x41, 0x42]))).toBe('application/octet-stream'); // invalid UTF-8
    expect(sniffMimeType(bytes('hello\x00world'))).toBe('application/octet-stream');
    expect(sniffMimeType(bytes('RIFF', u32le(4), 'XXXX'))).toBe('application/octet-stream');
    expect(sniffMimeType(bytes([0xff, 0xff, 0xff, 0xff]))).toBe('application/octet-stream');
  });
});

describe('sniffMimeType: text', () => {
  const cases: Array<[label: string, text: string, mime: string]> = [
    ['empty', '', 'text/plain'],
    ['ascii', 'hello world\n', 'text/plain'],
    ['utf-8', 'héllo wörld 名前 😀\r\n\tok', 'text/plain'],
    ['utf-8 with BOM', '\ufeffhello', 'text/plain'],
    ['csv', 'a,b,c\n1,2,3\n', 'text/plain'],
    ['text starting with MZ', 'MZ is the start of this sentence.', 'text/plain'],
    ['text starting with BM', 'BM is a perfectly normal start for a sentence', 'text/plain'],
    ['text starting with BZh', 'BZhello there', 'text/plain'],
    ['svg', '<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"/>', 'image/svg+xml'],
    ['svg after prolog', '<?xml version="1.0" encoding="UTF-8"?>\n<!-- made by hand -->\n<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" "http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">\n<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>', 'image/svg+xml'],
    ['svg with BOM and whitespace', '\ufeff\n  <svg>', 'image/svg+xml'],
    ['svg upper case', '<SVG onload="alert(1)">', 'image/svg+xml'],
    ['svg with a namespace prefix', '<?xml version="1.0"?><svg:svg xmlns:svg="http://www.w3.org/2000/svg"/>', 'image/svg+xml'],
    ['svg doctype with internal subset', '<!DOCTYPE svg [ <!ENTITY x "y"> ]><svg>', 'image/svg+xml'],
    ['html doctype', '<!DOCTYPE html>\n<html><body>x</body></html>', 'text/html'],
    ['html tag', '  <html lang="en">', 'text/html'],
    ['html script', '<script>alert(1)</script>', 'text/html'],
    ['html comment', '<!-- hi --> <p>x</p>', 'text/html'],
    ['html body upper case', '<BODY>', 'text/html'],
    ['html iframe', '<iframe src="x">', 'text/html'],
    ['xhtml', '<?xml version="1.0"?>\n<html xmlns="http://www.w3.org/1999/xhtml"><body/></html>', 'text/html'],
    ['not a tag: <bold', '<bold is not html', 'text/plain'],
    ['xml', '<?xml version="1.0"?><note><to>x</to></note>', 'text/xml'],
    ['json object', '{"a": [1, 2.5e3, -0.1, {"b": null, "c": true, "d": "x\\"y\\u00e9"}]}', 'application/json'],
    ['json array', ' [1, "two", false] ', 'application/json'],
    ['not json', '{a: 1}', 'text/plain'],
    ['json cut short in a small file', '{"a": [1, 2', 'text/plain'],
    ['json with trailing garbage', '{"a": 1} x', 'text/plain'],
  ];

  test.each(cases)('%s', (_label, text, mime) => {
    expect(sniffMimeType(Buffer.from(text, 'utf8'))).toBe(mime);
  });

  test('a large JSON document cut at the sniff length is still JSON', () => {
    const document = JSON.stringify({ items: Array.from({ length: 2000 }, (_, i) => ({ id: i, name: `item ${i} é`, ok: i % 2 === 0, v: i / 7 })) });
    // Shift the document so that the window ends at every kind of token: inside strings, numbers, literals, between them.
    for (let shift = 0; shift <= 60; shift++) {
      const head = Buffer.from(' '.repeat(shift) + document, 'utf8').subarray(0, MIME_SNIFF_LENGTH);
      expect(sniffMimeType(head)).toBe('application/json');
    }
    const exact = Buffer.from(document, 'utf8').subarray(0, MIME_SNIFF_LENGTH);
    expect(sniffMimeType(exact)).toBe('application/json');
  });

  test('a multi-byte character cut at the end of the window is still text', () => {
    const text = Buffer.from('a'.repeat(MIME_SNIFF_LENGTH - 1) + 'é', 'utf8');
    expect(text.length).toBe(MIME_SNIFF_LENGTH + 1);
    expect(sniffMimeType(text.subarray(0, MIME_SNIFF_LENGTH))).toBe('text/plain');
  });

  test('control bytes make text binary, tabs and newlines do not', () => {
    expect(sniffMimeType(Buffer.from('a\tb\nc\rd\fe\x1bf'))).toBe('text/plain');
    for (const control of ['\x01', '\x08', '\x0b', '\x0e', '\x1a', '\x1f']) {
      expect(sniffMimeType(Buffer.from(`text${control}more`))).toBe('application/octet-stream');
    }
  });

  test('HTML or SVG disguised behind a binary-looking extension is still found', () => {
    expect(sniffMimeType(Buffer.from('<svg onload=alert(1)>'))).toBe('image/svg+xml');
    expect(sniffMimeType(Buffer.from('<script>fetch("/steal")</script>'))).toBe('text/html');
  });
});

describe('lookupContentType', () => {
  test.each([
    ['png', 'image/png'],
    ['.PNG', 'image/png'],
    ['jpg', 'image/jpeg'],
    ['JPEG', 'image/jpeg'],
    ['webp', 'image/webp'],
    ['avif', 'image/avif'],
    ['svg', 'image/svg+xml'],
    ['pdf', 'application/pdf'],
    ['mp4', 'video/mp4'],
    ['mov', 'video/quicktime'],
    ['mp3', 'audio/mpeg'],
    ['txt', 'text/plain'],
    ['html', 'text/html'],
    ['json', 'application/json'],
    ['docx', 'application/vnd.openxmlformats-officedocument.wordprocessingml.document'],
    ['7z', 'application/x-7z-compressed'],
    ['', 'application/octet-stream'],
    ['exe', 'application/octet-stream'],
    ['php', 'application/octet-stream'],
    ['unknownext', 'application/octet-stream'],
    ['__proto__', 'application/octet-stream'],
    ['constructor', 'application/octet-stream'],
    ['toString', 'application/octet-stream'],
  ])('%j -> %s', (extension, mime) => {
    expect(lookupContentType(extension)).toBe(mime);
  });
});
