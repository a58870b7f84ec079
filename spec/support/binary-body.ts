import type { IncomingMessage } from 'node:http';
import type supertest from 'supertest';

/** Reads any response body as raw bytes (supertest would otherwise parse text and JSON). */
function readBinary(res: IncomingMessage, done: (err: Error | null, body: Buffer) => void): void {
  const chunks: Buffer[] = [];
  res.on('data', (chunk: Buffer) => chunks.push(chunk));
  res.on('end', () => done(null, Buffer.concat(chunks)));
  res.on('error', (err) => done(err, Buffer.alloc(0)));
}

/** supertest's `.buffer(true).parse(binary)`: the body as a Buffer, whatever its type. */
export const binary = readBinary as unknown as Parameters<supertest.Test['parse']>[0];
