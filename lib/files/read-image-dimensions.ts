/**
 * Image dimensions from file headers, without decoding: cheap enough for the main thread, which
 * uses them to budget a render before it starts (thumbnail-cache.ts), and without loading the
 * image codecs, which only the worker threads need.
 */

/**
 * Reads an image's pixel size from its header (png IHDR, gif screen and first frame, jpeg SOFn,
 * webp VP8/VP8L/VP8X) without decoding it, so that a small file claiming a huge canvas (a
 * decompression bomb) is refused before any memory is allocated for it. `undefined` when the
 * bytes are not one of these formats or the header is cut short.
 */
export function readImageDimensions(data: Uint8Array): { width: number; height: number } | undefined {
  const bytes = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  if (bytes.length >= 24 && bytes.readUInt32BE(0) === 0x89504e47 && bytes.readUInt32BE(4) === 0x0d0a1a0a) {
    if (bytes.toString('latin1', 12, 16) !== 'IHDR') return undefined;
    return { width: bytes.readUInt32BE(16), height: bytes.readUInt32BE(20) };
  }
  if (bytes.length >= 10 && /^GIF8[79]a$/.test(bytes.toString('latin1', 0, 6))) return readGifDimensions(bytes);
  if (bytes.length >= 4 && bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff) return readJpegDimensions(bytes);
  if (bytes.length >= 16 && bytes.toString('latin1', 0, 4) === 'RIFF' && bytes.toString('latin1', 8, 12) === 'WEBP') {
    return readWebpDimensions(bytes);
  }
  return undefined;
}

/**
 * The logical screen and the first frame (the only one decoded) may disagree, and the decoder
 * allocates for both; report the larger of each side.
 */
function readGifDimensions(bytes: Buffer): { width: number; height: number } | undefined {
  let width = bytes.readUInt16LE(6);
  let height = bytes.readUInt16LE(8);
  if (bytes.length < 13) return undefined;
  const packed = bytes[10]!;
  let offset = 13 + ((packed & 0x80) !== 0 ? 3 * 2 ** ((packed & 0x07) + 1) : 0);
  while (offset < bytes.length) {
    const block = bytes[offset]!;
    if (block === 0x2c) {
      if (offset + 9 > bytes.length) return undefined;
      width = Math.max(width, bytes.readUInt16LE(offset + 5));
      height = Math.max(height, bytes.readUInt16LE(offset + 7));
      return { width, height };
    }
    if (block !== 0x21) return undefined; // the trailer, or garbage, before any frame
    offset += 2; // introducer and label, then data sub-blocks up to a zero length
    while (offset < bytes.length && bytes[offset] !== 0) offset += bytes[offset]! + 1;
    offset += 1;
  }
  return undefined;
}

function readJpegDimensions(bytes: Buffer): { width: number; height: number } | undefined {
  let offset = 2;
  while (offset + 4 <= bytes.length) {
    if (bytes[offset] !== 0xff) return undefined;
    const marker = bytes[offset + 1]!;
    if (marker === 0xff) {
      offset += 1; // fill byte
      continue;
    }
    if (marker === 0xd8 || marker === 0x01 || (marker >= 0xd0 && marker <= 0xd7)) {
      offset += 2; // markers without a length
      continue;
    }
    if (marker === 0xd9 || marker === 0xda) return undefined; // end of image or scan data before any frame header
    const length = bytes.readUInt16BE(offset + 2);
    const isFrameHeader = marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc;
    if (isFrameHeader) {
      if (offset + 9 > bytes.length) return undefined;
      return { width: bytes.readUInt16BE(offset + 7), height: bytes.readUInt16BE(offset + 5) };
    }
    if (length < 2) return undefined;
    offset += 2 + length;
  }
  return undefined;
}

function readWebpDimensions(bytes: Buffer): { width: number; height: number } | undefined {
  const chunk = bytes.toString('latin1', 12, 16);
  if (chunk === 'VP8X' && bytes.length >= 30) {
    return { width: bytes.readUIntLE(24, 3) + 1, height: bytes.readUIntLE(27, 3) + 1 };
  }
  if (chunk === 'VP8L' && bytes.length >= 25 && bytes[20] === 0x2f) {
    const bits = bytes.readUInt32LE(21);
    return { width: (bits & 0x3fff) + 1, height: ((bits >>> 14) & 0x3fff) + 1 };
  }
  if (chunk === 'VP8 ' && bytes.length >= 30 && bytes[23] === 0x9d && bytes[24] === 0x01 && bytes[25] === 0x2a) {
    return { width: bytes.readUInt16LE(26) & 0x3fff, height: bytes.readUInt16LE(28) & 0x3fff };
  }
  return undefined;
}
