import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { ListObjectsV2Command, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { createS3Client, s3Storage } from '../../../lib/files/s3-storage.js';
import { InvalidStorageKeyError, StorageNotFoundError } from '../../../lib/files/storage.js';
import { chunkedSource, collectList, describeStorageContract, readAll } from '../../../lib/files/storage-contract.js';
import { startS3TestServer, type S3TestServer } from '../../support/s3-test-server.js';

const MIB = 1024 * 1024;
let server: S3TestServer;

beforeAll(async () => {
  server = await startS3TestServer();
});

afterAll(async () => {
  await server?.close();
});

/** A prefix no other test uses, so tests share the bucket without seeing each other. */
const freshPrefix = (label: string): string => `${label}-${randomBytes(4).toString('hex')}`;

describeStorageContract({
  name: 's3Storage on s3rver',
  testFunctions: { describe, test, beforeEach, afterEach },
  async makeStorage() {
    const storage = server.createStorage({ prefix: freshPrefix('contract') });
    return {
      storage,
      async cleanup() {
        // Every multipart upload a test started was completed or aborted.
        expect(await server.listPendingUploads()).toEqual([]);
      },
    };
  },
});

/** The S3 commands a client sends, in order, observed through the SDK's middleware stack. */
function recordCommands(client: S3Client): string[] {
  const names: string[] = [];
  client.middlewareStack.add(
    (next, context) => async (args) => {
      names.push(String(context.commandName));
      return next(args);
    },
    { step: 'initialize', name: 'recordCommandNames' },
  );
  return names;
}

describe('s3Storage on s3rver, beyond the contract', () => {
  test('a big source goes up as a multipart upload and comes back byte for byte', async () => {
    const client = createS3Client(server.clientSettings);
    const commands = recordCommands(client);
    const storage = s3Storage({ bucket: server.bucket, client, prefix: freshPrefix('multipart') });
    try {
      const data = randomBytes(12 * MIB + 123);
      await expect(storage.write('c/r/big.bin', chunkedSource(data, 256 * 1024))).resolves.toEqual({ size: data.length });
      expect(commands.filter((name) => name !== 'UploadPartCommand')).toEqual(['CreateMultipartUploadCommand', 'CompleteMultipartUploadCommand']);
      expect(commands.filter((name) => name === 'UploadPartCommand')).toHaveLength(3);
      const back = await readAll(await storage.read('c/r/big.bin'));
      expect(back.equals(data)).toBe(true);
      expect((await readAll(await storage.read('c/r/big.bin', { start: 5 * MIB - 3, end: 5 * MIB + 2 }))).equals(data.subarray(5 * MIB - 3, 5 * MIB + 3))).toBe(true);
      expect(await storage.stat('c/r/big.bin')).toMatchObject({ size: data.length });
    } finally {
      client.destroy();
    }
  });

  test('a source failing after the multipart upload began: its error, no object, the upload aborted', async () => {
    const storage = server.createStorage({ prefix: freshPrefix('abort') });
    await storage.write('c/r/keep.bin', Readable.from([Buffer.from('previous')]));
    const error = new Error('client went away');
    const source = Readable.from(
      (async function* () {
        yield* chunkedSource(randomBytes(11 * MIB), 512 * 1024);
        throw error;
      })(),
      { objectMode: false },
    );
    await expect(storage.write('c/r/keep.bin', source)).rejects.toBe(error);
    expect((await readAll(await storage.read('c/r/keep.bin'))).toString()).toBe('previous');
    expect((await collectList(storage.list(''))).map((entry) => entry.key)).toEqual(['c/r/keep.bin']);
    expect(await server.listPendingUploads()).toEqual([]);
  });

  test('an S3 failure rejects the write and destroys the source', async () => {
    const missing = s3Storage({ bucket: 'no-such-bucket', client: server.createStorage().client });
    const source = chunkedSource(randomBytes(300_000));
    await expect(missing.write('c/r/a.bin', source)).rejects.toMatchObject({ name: 'NoSuchBucket' });
    expect(source.destroyed).toBe(true);
    // A missing bucket is a configuration fault (a 500 with the cause logged), not a missing file.
    const readFailure = missing.read('c/r/a.bin');
    await expect(readFailure).rejects.toMatchObject({ name: 'NoSuchBucket' });
    await expect(readFailure).rejects.not.toBeInstanceOf(StorageNotFoundError);
    await expect(collectList(missing.list(''))).rejects.toMatchObject({ name: 'NoSuchBucket' });
  });

  test('keys live under the prefix, and prefixes never see each other', async () => {
    const one = server.createStorage({ prefix: 'tenant/one/' });
    const other = server.createStorage({ prefix: 'tenant/one-more' });
    const whole = server.createStorage();
    expect(one.prefix).toBe('tenant/one/');
    await one.write('c/r/a.txt', Readable.from([Buffer.from('one')]));
    await other.write('c/r/a.txt', Readable.from([Buffer.from('other')]));
    expect(existsSync(path.join(server.bucketDirectory, 'tenant', 'one', 'c', 'r', 'a.txt._S3rver_object'))).toBe(true);
    expect((await collectList(one.list(''))).map((entry) => entry.key)).toEqual(['c/r/a.txt']);
    expect((await collectList(whole.list('tenant'))).map((entry) => entry.key)).toEqual(['tenant/one-more/c/r/a.txt', 'tenant/one/c/r/a.txt']);
    await one.deletePrefix('c');
    expect((await readAll(await other.read('c/r/a.txt'))).toString()).toBe('other');
    await other.deletePrefix('c');
    expect(await collectList(whole.list('tenant'))).toEqual([]);
  });

  test('objects another tool wrote under names no key could have are left out of listings', async () => {
    const prefix = freshPrefix('foreign');
    const storage = server.createStorage({ prefix });
    // A console's "folder" marker and a Windows-style name: valid S3 keys, not storage keys.
    for (const Key of [`${prefix}/c/folder/`, `${prefix}/c/back\\slash`, `${prefix}/c/ok.txt`]) {
      await storage.client.send(new PutObjectCommand({ Bucket: server.bucket, Key, Body: 'x' }));
    }
    const raw = await storage.client.send(new ListObjectsV2Command({ Bucket: server.bucket, Prefix: `${prefix}/` }));
    expect(raw.Contents?.map((object) => object.Key).sort()).toEqual([`${prefix}/c/back\\slash`, `${prefix}/c/folder/`, `${prefix}/c/ok.txt`]);
    expect((await collectList(storage.list(''))).map((entry) => entry.key)).toEqual(['c/ok.txt']);
  });

  test('a key that only the prefix makes too long is refused before any request', async () => {
    const client = createS3Client(server.clientSettings);
    const commands = recordCommands(client);
    const storage = s3Storage({ bucket: server.bucket, client, prefix: 'p'.repeat(200) });
    try {
      const key = `c/${'k'.repeat(250)}/${'k'.repeat(250)}/${'k'.repeat(250)}`; // 757 bytes alone, 958 with the prefix
      await expect(storage.stat(key)).resolves.toBeUndefined();
      const longer = `${key}/${'k'.repeat(100)}`;
      await expect(storage.write(longer, Readable.from([Buffer.from('x')]))).rejects.toBeInstanceOf(InvalidStorageKeyError);
      await expect(storage.read(longer)).rejects.toThrow(/with the prefix is longer than 1024 bytes/);
      expect(commands).toEqual(['HeadObjectCommand']);
    } finally {
      client.destroy();
    }
  });

  test('readers that give up early release their connections', async () => {
    const storage = server.createStorage({ prefix: freshPrefix('sockets') });
    await storage.write('c/r/big.bin', chunkedSource(randomBytes(2 * MIB)));
    // More than the SDK's 50 sockets: a leaked connection per abandoned read would hang this loop.
    for (let i = 0; i < 80; i++) {
      const stream = await storage.read('c/r/big.bin');
      await new Promise<void>((resolve) => stream.once('data', () => resolve()));
      stream.destroy();
    }
    expect((await readAll(await storage.read('c/r/big.bin', { start: 0, end: 9 }))).length).toBe(10);
  }, 60_000);

  test('options are checked when the storage is made', () => {
    const client = new S3Client(server.clientSettings);
    try {
      expect(() => s3Storage({ bucket: '', client })).toThrow(TypeError);
      expect(() => s3Storage({} as never)).toThrow(/`bucket`/);
      for (const prefix of ['../up', '/abs', 'a//b', 'a\\b', '.']) {
        expect(() => s3Storage({ bucket: 'b', client, prefix })).toThrow(/invalid `prefix`/);
      }
      expect(() => s3Storage({ bucket: 'b', client, partSize: 1024 })).toThrow(/partSize/);
      expect(() => s3Storage({ bucket: 'b', client, queueSize: 0 })).toThrow(/queueSize/);
      expect(s3Storage({ bucket: 'b', client, prefix: 'x/y/' }).prefix).toBe('x/y/');
      expect(s3Storage({ bucket: 'b', client }).client).toBe(client);
    } finally {
      client.destroy();
    }
  });

  test('a client built from settings sends checksums only when an operation requires them', async () => {
    const client = createS3Client(server.clientSettings);
    try {
      expect(await client.config.requestChecksumCalculation()).toBe('WHEN_REQUIRED');
      expect(await client.config.responseChecksumValidation()).toBe('WHEN_REQUIRED');
      expect(await client.config.region()).toBe('us-east-1');
      expect(client.config.forcePathStyle).toBe(true);
    } finally {
      client.destroy();
    }
  });
});

describe('s3Storage without a server', () => {
  test('an unreachable endpoint rejects (a 500 for the request), it does not hang', async () => {
    const storage = s3Storage({
      bucket: 'b',
      client: { ...server.clientSettings, endpoint: 'http://127.0.0.1:9' },
    });
    try {
      await expect(storage.stat('c/r/a.txt')).rejects.toThrow();
      await expect(storage.write('c/r/a.txt', Readable.from([Buffer.from('x')]))).rejects.toThrow();
    } finally {
      storage.client.destroy();
    }
  }, 30_000);
});
