/**
 * MIME detection from content, without a dependency: a field's `mimeTypes` is checked against what
 * the bytes are, never against what the client claims (docs/files.md). The names follow what PocketBase
 * reports (the Go `mimetype` package) where they differ from IANA, so a `mimeTypes` list copied
 * from a PocketBase schema keeps working (`image/x-icon`, `audio/x-m4a`, `text/xml`).
 */

/** How many leading bytes `sniffMimeType` looks at; the upload buffers this much before deciding. */
export const MIME_SNIFF_LENGTH = 4100;

/** The answer when nothing is recognised. */
export const UNKNOWN_MIME_TYPE = 'application/octet-stream';

type Bytes = Uint8Array;

/** Exact byte signatures at offset 0, checked in order; the first match wins. */
const MAGIC: ReadonlyArray<readonly [signature: readonly number[] | string, mime: string]> = [
  [[0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], 'image/png'],
  [[0xff, 0xd8, 0xff], 'image/jpeg'],
  ['GIF87a', 'image/gif'],
  ['GIF89a', 'image/gif'],
  [[0x49, 0x49, 0x2a, 0x00], 'image/tiff'],
  [[0x4d, 0x4d, 0x00, 0x2a], 'image/tiff'],
  [[0xff, 0x0a], 'image/jxl'],
  [[0x00, 0x00, 0x00, 0x0c, 0x4a, 0x58, 0x4c, 0x20, 0x0d, 0x0a, 0x87, 0x0a], 'image/jxl'],
  ['8BPS', 'image/vnd.adobe.photoshop'],
  ['%PDF-', 'application/pdf'],
  ['{\\rtf', 'application/rtf'],
  ['%!PS', 'application/postscript'],
  [[0x1f, 0x8b, 0x08], 'application/gzip'],
  ['BZh', 'application/x-bzip2'],
  [[0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00], 'application/x-xz'],
  [[0x28, 0xb5, 0x2f, 0xfd], 'application/zstd'],
  [[0x37, 0x7a, 0xbc, 0xaf, 0x27, 0x1c], 'application/x-7z-compressed'],
  ['Rar!\x1a\x07', 'application/x-rar-compressed'],
  ['SQLite format 3\x00', 'application/vnd.sqlite3'],
  ['\x00asm', 'application/wasm'],
  ['\x7fELF', 'application/x-elf'],
  ['MZ', 'application/vnd.microsoft.portable-executable'],
  ['fLaC', 'audio/flac'],
  ['ID3', 'audio/mpeg'],
  ['MThd', 'audio/midi'],
  ['#!AMR', 'audio/amr'],
  ['wOFF', 'font/woff'],
  ['wOF2', 'font/woff2'],
  ['OTTO', 'font/otf'],
  [[0x00, 0x01, 0x00, 0x00, 0x00], 'font/ttf'],
];

/** ISO base media (`ftyp` box) brands: images first, because HEIF/AVIF share the container with video. */
const FTYP_BRANDS: ReadonlyArray<readonly [brands: readonly string[], mime: string]> = [
  [['avif', 'avis'], 'image/avif'],
  [['heic', 'heix', 'heim', 'heis'], 'image/heic'],
  [['hevc', 'hevx'], 'image/heic-sequence'],
  [['mif1', 'msf1'], 'image/heif'],
  [['qt  '], 'video/quicktime'],
  [['M4A ', 'M4B '], 'audio/x-m4a'],
  [['M4V ', 'M4VH', 'M4VP'], 'video/x-m4v'],
  [['3gp4', '3gp5', '3gp6', '3gp7', '3gs7', '3ge6', '3ge7', '3gg6'], 'video/3gpp'],
  [['3g2a', '3g2b', '3g2c'], 'video/3gpp2'],
  [['crx '], 'image/x-canon-cr3'],
];

/** Tags that make text HTML when they open the document (the WHATWG MIME Sniffing list). */
const HTML_OPENERS = [
  '<!doctype html', '<html', '<head', '<script', '<iframe', '<h1', '<div', '<font', '<table', '<a',
  '<style', '<title', '<b', '<body', '<br', '<p', '<!--',
];

/**
 * The MIME type of a file from its first bytes (pass up to `MIME_SNIFF_LENGTH`; fewer when the
 * file is shorter). Binary signatures first, then text: SVG, HTML, XML, JSON, and `text/plain` for
 * valid UTF-8 without binary control bytes; otherwise `application/octet-stream`. An empty file is
 * `text/plain` (as PocketBase and Go's sniffer say). The result is a bare type without parameters.
 *
 * Why the order matters: SVG and HTML are text that a browser may run, so they are recognised
 * before the plain-text fallback; a field that allows only `text/plain` must not take them.
 */
export function sniffMimeType(head: Bytes): string {
  const bytes = head.subarray(0, MIME_SNIFF_LENGTH);
  return sniffBinary(bytes) ?? sniffText(bytes) ?? UNKNOWN_MIME_TYPE;
}

function sniffBinary(b: Bytes): string | undefined {
  for (const [signature, mime] of MAGIC) {
    const refined = hasBytes(b, 0, signature) ? refineMagic(b, mime) : undefined;
    if (refined) return refined;
  }
  return sniffRiff(b) ?? sniffIsoMedia(b) ?? sniffZip(b) ?? sniffEbml(b) ?? sniffOgg(b) ?? sniffAiff(b)
    ?? sniffBmp(b) ?? sniffQuickTimeAtom(b) ?? sniffIcon(b) ?? sniffMpegAudio(b) ?? sniffTar(b);
}

/** Signatures too short to stand alone get a second look. */
function refineMagic(b: Bytes, mime: string): string | undefined {
  if (mime === 'application/vnd.microsoft.portable-executable') {
    // "MZ" also starts plain text ("MZ is a ..."): require the PE/DOS header's binary layout.
    return b.length >= 64 && !isMostlyText(b) ? mime : undefined;
  }
  if (mime === 'application/x-bzip2') return b.length >= 4 && b[3]! >= 0x31 && b[3]! <= 0x39 ? mime : undefined;
  if (mime === 'image/jxl' && b.length === 2) return undefined;
  return mime;
}

function sniffRiff(b: Bytes): string | undefined {
  if (!hasBytes(b, 0, 'RIFF') || b.length < 12) return undefined;
  if (hasBytes(b, 8, 'WEBP')) return 'image/webp';
  if (hasBytes(b, 8, 'WAVE')) return 'audio/wav';
  if (hasBytes(b, 8, 'AVI ')) return 'video/x-msvideo';
  return undefined;
}

function sniffIsoMedia(b: Bytes): string | undefined {
  if (b.length < 12 || !hasBytes(b, 4, 'ftyp')) return undefined;
  const boxSize = readUint32(b, 0);
  const brands = [latin1(b, 8, 12)];
  for (let offset = 16; offset + 4 <= Math.min(boxSize, b.length); offset += 4) brands.push(latin1(b, offset, offset + 4));
  // The major brand decides, unless it is a generic HEIF one that the compatible brands refine.
  const major = brands[0]!;
  const generic = ['mif1', 'msf1'].includes(major);
  for (const [names, mime] of FTYP_BRANDS) {
    if (generic ? brands.some((brand) => names.includes(brand)) : names.includes(major)) return mime;
  }
  if (/^M4A|^F4A/.test(major)) return 'audio/x-m4a';
  return 'video/mp4'; // isom, iso2..iso9, mp41, mp42, avc1, dash, mmp4, f4v ... all MP4 video
}

/** Old QuickTime files without `ftyp`: a top-level atom name at offset 4. */
function sniffQuickTimeAtom(b: Bytes): string | undefined {
  if (b.length < 8) return undefined;
  return ['moov', 'mdat', 'wide', 'pnot'].some((atom) => hasBytes(b, 4, atom)) ? 'video/quicktime' : undefined;
}

/** Zip, and the zip-based documents that say what they are near the start. */
function sniffZip(b: Bytes): string | undefined {
  if (!hasBytes(b, 0, [0x50, 0x4b]) || b.length < 4) return undefined;
  const kind = (b[2]! << 8) | b[3]!;
  if (kind !== 0x0304 && kind !== 0x0506 && kind !== 0x0708) return undefined;
  if (kind !== 0x0304 || b.length < 30) return 'application/zip';
  // First entry "mimetype", stored uncompressed: EPUB and OpenDocument put their type right there.
  const nameLength = b[26]! | (b[27]! << 8);
  const extraLength = b[28]! | (b[29]! << 8);
  if (nameLength === 8 && latin1(b, 30, 38) === 'mimetype') {
    const content = latin1(b, 38 + extraLength, Math.min(b.length, 38 + extraLength + 80));
    const declared = /^application\/[a-z0-9.+-]+/.exec(content)?.[0];
    if (declared === 'application/epub+zip' || declared?.startsWith('application/vnd.oasis.opendocument.')) return declared;
  }
  // Office Open XML: the part folders show up in the local file headers of the first entries.
  const text = latin1(b, 0, b.length);
  if (text.includes('[Content_Types].xml') || text.includes('_rels/.rels')) {
    if (text.includes('word/')) return 'application/vnd.openxmlformats-officedocument.wordprocessingml.document';
    if (text.includes('xl/')) return 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet';
    if (text.includes('ppt/')) return 'application/vnd.openxmlformats-officedocument.presentationml.presentation';
  }
  return 'application/zip';
}

/** Matroska and WebM share the EBML header; the DocType element tells them apart. */
function sniffEbml(b: Bytes): string | undefined {
  if (!hasBytes(b, 0, [0x1a, 0x45, 0xdf, 0xa3])) return undefined;
  const text = latin1(b, 0, Math.min(b.length, 64));
  const docType = text.indexOf('\x42\x82');
  if (docType >= 0 && text.slice(docType + 3, docType + 7) === 'webm') return 'video/webm';
  return 'video/x-matroska';
}

function sniffOgg(b: Bytes): string | undefined {
  if (!hasBytes(b, 0, 'OggS')) return undefined;
  const firstPacket = latin1(b, 28, Math.min(b.length, 40));
  if (firstPacket.startsWith('\x80theora') || firstPacket.startsWith('\x01video')) return 'video/ogg';
  if (firstPacket.startsWith('\x01vorbis') || firstPacket.startsWith('OpusHead') || firstPacket.startsWith('Speex') || firstPacket.startsWith('\x7fFLAC')) {
    return 'audio/ogg';
  }
  return 'application/ogg';
}

function sniffAiff(b: Bytes): string | undefined {
  return hasBytes(b, 0, 'FORM') && (hasBytes(b, 8, 'AIFF') || hasBytes(b, 8, 'AIFC')) ? 'audio/aiff' : undefined;
}

/** "BM" alone is common text; the DIB header size that follows the file header confirms a bitmap. */
function sniffBmp(b: Bytes): string | undefined {
  if (!hasBytes(b, 0, 'BM') || b.length < 18) return undefined;
  const dibSize = readUint32LE(b, 14);
  return [12, 16, 40, 52, 56, 64, 108, 124].includes(dibSize) ? 'image/bmp' : undefined;
}

/**
 * ICO and CUR: reserved 0, type 1 or 2, an image count of 1–255 and, when visible, a first
 * directory entry whose reserved byte is 0. (A QuickTime atom of size 256 starts the same way,
 * which is why atoms are checked first.)
 */
function sniffIcon(b: Bytes): string | undefined {
  if (b.length < 6 || b[0] !== 0 || b[1] !== 0 || b[3] !== 0 || (b[2] !== 1 && b[2] !== 2)) return undefined;
  if (b[5] !== 0 || b[4] === 0) return undefined;
  if (b.length > 9 && b[9] !== 0) return undefined;
  return 'image/x-icon';
}

/**
 * MPEG audio without an ID3 tag: an 11-bit frame sync and a header whose fields are not the
 * reserved values. Layer I–III is MP3 (`audio/mpeg`); "layer 0" is an AAC ADTS stream.
 */
function sniffMpegAudio(b: Bytes): string | undefined {
  if (b.length < 4 || b[0] !== 0xff || (b[1]! & 0xe0) !== 0xe0) return undefined;
  const version = (b[1]! >> 3) & 0x03;
  const layer = (b[1]! >> 1) & 0x03;
  if (layer === 0) return (b[1]! & 0xf6) === 0xf0 && ((b[2]! >> 2) & 0x0f) < 13 ? 'audio/aac' : undefined;
  const bitrate = (b[2]! >> 4) & 0x0f;
  const sampleRate = (b[2]! >> 2) & 0x03;
  if (version === 1 || bitrate === 0x0f || sampleRate === 0x03) return undefined;
  return 'audio/mpeg';
}

/** POSIX tar: "ustar" at offset 257 (only visible when the caller passes more than 262 bytes). */
function sniffTar(b: Bytes): string | undefined {
  return b.length >= 262 && hasBytes(b, 257, 'ustar') ? 'application/x-tar' : undefined;
}

function sniffText(b: Bytes): string | undefined {
  let body = b;
  if (hasBytes(body, 0, [0xef, 0xbb, 0xbf])) body = body.subarray(3);
  if (body.some(isBinaryByte)) return undefined;
  let text: string;
  try {
    // `stream: true` tolerates a multi-byte character cut at the end of the sniffed head.
    text = new TextDecoder('utf-8', { fatal: true }).decode(body, { stream: true });
  } catch {
    return undefined;
  }
  const start = text.trimStart();
  const root = start.slice(skipXmlProlog(start));
  const lower = start.slice(0, 64).toLowerCase();
  if (/^<(?:[a-z0-9_-]+:)?svg[\s>/]/i.test(root)) return 'image/svg+xml';
  if (HTML_OPENERS.some((tag) => lower.startsWith(tag) && isTagEnd(lower.charAt(tag.length), tag))) return 'text/html';
  if (/^<(?:[a-z0-9_-]+:)?html[\s>]/i.test(root)) return 'text/html'; // XHTML behind an XML prolog
  if (lower.startsWith('<?xml')) return 'text/xml';
  if (/^[[{]/.test(start)) {
    const json = scanJson(start);
    // A head cut at the sniff length may end mid-document: a valid prefix is then enough.
    if (json === 'complete' || (json === 'prefix' && b.length >= MIME_SNIFF_LENGTH)) return 'application/json';
  }
  return 'text/plain';
}

/** Length of what may precede an XML root: declaration, processing instructions, comments, doctype, whitespace. */
function skipXmlProlog(text: string): number {
  const prolog = /^(?:<\?[^>]*\?>|<!--[\s\S]*?-->|<!doctype[^>[]*(?:\[[\s\S]*?\])?\s*>|\s+)*/i.exec(text);
  return prolog ? prolog[0].length : 0;
}

function isTagEnd(next: string, tag: string): boolean {
  if (tag === '<!--') return true;
  return next === ' ' || next === '>' || next === '\t' || next === '\n' || next === '\r' || next === '\f';
}

const JSON_STRING = /"(?:[^"\\\u0000-\u001f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"/y;
const JSON_STRING_PREFIX = /"(?:[^"\\\u0000-\u001f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*(?:\\(?:u[0-9a-fA-F]{0,3})?)?$/y;
const JSON_NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
const JSON_NUMBER_PREFIX = /-?(?:0|[1-9][0-9]*)?(?:\.[0-9]*)?(?:[eE][+-]?[0-9]*)?$/y;
const JSON_LITERAL = /true|false|null/y;

type JsonScan = 'complete' | 'prefix' | 'invalid';

/**
 * Checks JSON syntax without building values, and tells a complete document from a valid prefix
 * of one, so that a large JSON file cut at the sniff length is still recognised.
 */
function scanJson(text: string): JsonScan {
  type State = 'value' | 'valueOrClose' | 'key' | 'keyOrClose' | 'colon' | 'commaOrClose' | 'end';
  const stack: Array<'{' | '['> = [];
  let state: State = 'value';
  let i = 0;
  const match = (pattern: RegExp): number => {
    pattern.lastIndex = i;
    return pattern.test(text) ? pattern.lastIndex : -1;
  };
  const afterValue = (): State => (stack.length === 0 ? 'end' : 'commaOrClose');
  while (true) {
    while (i < text.length && ' \t\n\r'.includes(text[i]!)) i++;
    if (i >= text.length) return state === 'end' ? 'complete' : 'prefix';
    const c = text[i]!;
    if (state === 'end') return 'invalid';
    if (state === 'colon') {
      if (c !== ':') return 'invalid';
      i++;
      state = 'value';
    } else if (state === 'commaOrClose') {
      const top = stack[stack.length - 1];
      if (c === ',') state = top === '{' ? 'key' : 'value';
      else if ((c === '}' && top === '{') || (c === ']' && top === '[')) {
        stack.pop();
        state = afterValue();
      } else return 'invalid';
      i++;
    } else if (state === 'key' || state === 'keyOrClose') {
      if (c === '}' && state === 'keyOrClose') {
        stack.pop();
        i++;
        state = afterValue();
        continue;
      }
      if (c !== '"') return 'invalid';
      const end = match(JSON_STRING);
      if (end < 0) return match(JSON_STRING_PREFIX) >= 0 ? 'prefix' : 'invalid';
      i = end;
      state = 'colon';
    } else {
      if (c === ']' && state === 'valueOrClose') {
        stack.pop();
        i++;
        state = afterValue();
      } else if (c === '{' || c === '[') {
        stack.push(c);
        i++;
        state = c === '{' ? 'keyOrClose' : 'valueOrClose';
      } else if (c === '"') {
        const end = match(JSON_STRING);
        if (end < 0) return match(JSON_STRING_PREFIX) >= 0 ? 'prefix' : 'invalid';
        i = end;
        state = afterValue();
      } else {
        if (match(JSON_NUMBER_PREFIX) >= 0) return 'prefix'; // the text ends inside a number
        const end = Math.max(match(JSON_NUMBER), match(JSON_LITERAL));
        if (end < 0) {
          const rest = text.slice(i);
          return ['true', 'false', 'null'].some((word) => word.startsWith(rest)) ? 'prefix' : 'invalid';
        }
        i = end;
        state = afterValue();
      }
    }
  }
}

/** The WHATWG "binary data byte" set: control bytes that never appear in text. */
function isBinaryByte(byte: number): boolean {
  return byte <= 0x08 || byte === 0x0b || (byte >= 0x0e && byte <= 0x1a) || (byte >= 0x1c && byte <= 0x1f);
}

function isMostlyText(b: Bytes): boolean {
  return !b.subarray(0, 64).some(isBinaryByte);
}

function hasBytes(b: Bytes, offset: number, signature: readonly number[] | string): boolean {
  if (b.length < offset + signature.length) return false;
  for (let i = 0; i < signature.length; i++) {
    const expected = typeof signature === 'string' ? signature.charCodeAt(i) : signature[i];
    if (b[offset + i] !== expected) return false;
  }
  return true;
}

function latin1(b: Bytes, start: number, end: number): string {
  if (start >= b.length || end <= start) return '';
  return Buffer.from(b.buffer, b.byteOffset + start, Math.max(0, Math.min(end, b.length) - start)).toString('latin1');
}

function readUint32(b: Bytes, offset: number): number {
  return ((b[offset]! << 24) >>> 0) + (b[offset + 1]! << 16) + (b[offset + 2]! << 8) + b[offset + 3]!;
}

function readUint32LE(b: Bytes, offset: number): number {
  return b[offset]! + (b[offset + 1]! << 8) + (b[offset + 2]! << 16) + ((b[offset + 3]! << 24) >>> 0);
}

/** Serving types by stored extension (lower case, no dot). */
const EXTENSION_TYPES: Readonly<Record<string, string>> = {
  png: 'image/png', jpg: 'image/jpeg', jpeg: 'image/jpeg', jpe: 'image/jpeg', jfif: 'image/jpeg',
  gif: 'image/gif', webp: 'image/webp', bmp: 'image/bmp', ico: 'image/x-icon', cur: 'image/x-icon',
  tif: 'image/tiff', tiff: 'image/tiff', avif: 'image/avif', heic: 'image/heic', heif: 'image/heif',
  jxl: 'image/jxl', svg: 'image/svg+xml', psd: 'image/vnd.adobe.photoshop',
  mp3: 'audio/mpeg', wav: 'audio/wav', flac: 'audio/flac', ogg: 'audio/ogg', oga: 'audio/ogg',
  opus: 'audio/ogg', m4a: 'audio/x-m4a', aac: 'audio/aac', aif: 'audio/aiff', aiff: 'audio/aiff',
  mid: 'audio/midi', midi: 'audio/midi', amr: 'audio/amr', weba: 'audio/webm',
  mp4: 'video/mp4', m4v: 'video/x-m4v', mov: 'video/quicktime', qt: 'video/quicktime',
  webm: 'video/webm', mkv: 'video/x-matroska', ogv: 'video/ogg', avi: 'video/x-msvideo',
  '3gp': 'video/3gpp', '3g2': 'video/3gpp2',
  pdf: 'application/pdf', zip: 'application/zip', gz: 'application/gzip', tgz: 'application/gzip',
  tar: 'application/x-tar', bz2: 'application/x-bzip2', xz: 'application/x-xz', zst: 'application/zstd',
  '7z': 'application/x-7z-compressed', rar: 'application/x-rar-compressed',
  json: 'application/json', xml: 'text/xml', txt: 'text/plain', text: 'text/plain', log: 'text/plain',
  csv: 'text/csv', tsv: 'text/tab-separated-values', md: 'text/markdown', html: 'text/html', htm: 'text/html',
  css: 'text/css', js: 'text/javascript', mjs: 'text/javascript', ics: 'text/calendar', vcf: 'text/vcard',
  rtf: 'application/rtf', ps: 'application/postscript', epub: 'application/epub+zip',
  doc: 'application/msword', xls: 'application/vnd.ms-excel', ppt: 'application/vnd.ms-powerpoint',
  docx: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
  xlsx: 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
  pptx: 'application/vnd.openxmlformats-officedocument.presentationml.presentation',
  odt: 'application/vnd.oasis.opendocument.text', ods: 'application/vnd.oasis.opendocument.spreadsheet',
  odp: 'application/vnd.oasis.opendocument.presentation',
  woff: 'font/woff', woff2: 'font/woff2', ttf: 'font/ttf', otf: 'font/otf',
  wasm: 'application/wasm', sqlite: 'application/vnd.sqlite3',
};

/**
 * The Content-Type to serve a stored file with, from its extension (`png`, `.PNG`): serving must
 * not re-read and sniff every download, and the extension of a stored name is ours (lower-cased,
 * [a-z0-9]). Unknown or missing: `application/octet-stream`. Whether the type may be shown inline
 * is the serving code's decision, not this table's (svg and html are here but never inline).
 */
export function lookupContentType(extension: string): string {
  const key = String(extension ?? '').replace(/^\./, '').toLowerCase();
  return Object.hasOwn(EXTENSION_TYPES, key) ? EXTENSION_TYPES[key]! : UNKNOWN_MIME_TYPE;
}

/** The usual extension of each type we serve by extension: the first one the table lists for it. */
const TYPE_EXTENSIONS: ReadonlyMap<string, string> = new Map(
  Object.entries(EXTENSION_TYPES)
    .reverse()
    .map(([extension, type]) => [type, extension] as const),
);

/**
 * The extension a file of `mimeType` is usually stored with (`image/png` -> `png`), or undefined
 * for a type the table does not know (`application/octet-stream` among them): an upload whose name
 * has no extension (a bare Blob is named `blob`) gets one from its sniffed type, so that it is
 * served with the right Content-Type and can have thumbnails.
 */
export function lookupExtension(mimeType: string): string | undefined {
  return TYPE_EXTENSIONS.get(mimeType);
}

/**
 * The Content-Type to serve a file name with: `lookupContentType` of its extension (after the last
 * dot of the last path segment; a leading dot, as in `.htaccess`, starts a name, not an extension).
 */
export function lookupContentTypeOfName(fileName: string): string {
  const base = String(fileName).slice(String(fileName).lastIndexOf('/') + 1);
  const dot = base.lastIndexOf('.');
  return lookupContentType(dot > 0 ? base.slice(dot + 1) : '');
}
