/**
 * The jimp class thumbnails are made with, webp included. Kept apart from render-thumbnail.ts so
 * that the package's public declarations never reach jimp's inferred types (which do not compile
 * under `skipLibCheck: false`): only the renderer and tests import this module.
 */
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { createJimp } from '@jimp/core';
import { defaultFormats, defaultPlugins, type Bitmap } from 'jimp';
import encodeWebp, { init as initWebpEncoder } from '@jsquash/webp/encode.js';
import decodeWebp, { init as initWebpDecoder } from '@jsquash/webp/decode.js';
import { DEFAULT_THUMBNAIL_QUALITY } from './thumbnail-spec.js';

type WebpFormat = {
  mime: 'image/webp';
  hasAlpha: true;
  encode: (bitmap: Bitmap, options?: { quality?: number }) => Promise<Buffer>;
  decode: (data: Buffer) => Promise<Bitmap>;
};

/**
 * A jimp format for webp backed by @jsquash/webp. `@jimp/wasm-webp` cannot be used on Node: it
 * re-initialises its codec without a module on every call, and the emscripten loader then
 * `fetch`es a file:// URL, which Node's fetch refuses. Here the wasm is compiled from disk once.
 */
function createWebpFormat(): WebpFormat {
  return {
    mime: 'image/webp',
    hasAlpha: true,
    encode: async (bitmap, { quality = DEFAULT_THUMBNAIL_QUALITY } = {}) => {
      await loadWebpCodecs();
      const image = { data: new Uint8ClampedArray(bitmap.data), width: bitmap.width, height: bitmap.height, colorSpace: 'srgb' };
      return Buffer.from(await encodeWebp(image as never, { quality }));
    },
    decode: async (data) => {
      await loadWebpCodecs();
      const copy = new Uint8Array(data);
      const result = await decodeWebp(copy.buffer);
      const pixels = result.data as Uint8ClampedArray;
      return { data: Buffer.from(pixels.buffer, pixels.byteOffset, pixels.byteLength), width: result.width, height: result.height };
    },
  };
}

/**
 * The jimp class thumbnails are made with: jimp's pure-JS formats and plugins plus webp. Exported
 * so that tests and tools create and read images exactly as the renderer does, webp included.
 */
export const ThumbnailJimp = createJimp({ formats: [...defaultFormats, createWebpFormat], plugins: defaultPlugins });
/** An image of ThumbnailJimp. */
export type JimpImage = InstanceType<typeof ThumbnailJimp>;

/** The part of the WebAssembly global we use; the project's `lib` (ES2022, no DOM) does not declare it. */
interface WasmApi {
  validate(bytes: Uint8Array): boolean;
  compile(bytes: Uint8Array): Promise<object>;
}
const wasm = (globalThis as unknown as { WebAssembly: WasmApi }).WebAssembly;

let webpCodecs: Promise<void> | undefined;

/** Compiles and installs the webp codecs once per thread; a failed attempt is retried next time. */
function loadWebpCodecs(): Promise<void> {
  webpCodecs ??= initializeWebpCodecs().catch((error: unknown) => {
    webpCodecs = undefined;
    throw error;
  });
  return webpCodecs;
}

async function initializeWebpCodecs(): Promise<void> {
  // createRequire rather than import.meta.resolve: the latter is missing under Jest's ESM runtime.
  const encoderPath = createRequire(import.meta.url).resolve('@jsquash/webp/encode.js');
  const locateCodec = (path: string): URL => new URL(path, pathToFileURL(encoderPath));
  // @jsquash picks its SIMD or plain encoder glue by feature detection; compile the matching wasm.
  // Node 20's V8 always has SIMD, but an embedder may disable it, hence the fallback.
  const simdBytes = await readFile(locateCodec('codec/enc/webp_enc_simd.wasm'));
  const encoderBytes = wasm.validate(simdBytes) ? simdBytes : await readFile(locateCodec('codec/enc/webp_enc.wasm'));
  const decoderBytes = await readFile(locateCodec('codec/dec/webp_dec.wasm'));
  // The published typings omit the (supported) WebAssembly.Module argument of init().
  const installEncoder = initWebpEncoder as unknown as (module: object) => Promise<unknown>;
  const installDecoder = initWebpDecoder as unknown as (module: object) => Promise<unknown>;
  await installEncoder(await wasm.compile(encoderBytes));
  await installDecoder(await wasm.compile(decoderBytes));
}
