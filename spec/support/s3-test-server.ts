import { fork, type ChildProcess } from 'node:child_process';
import { existsSync, promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { S3Client } from '@aws-sdk/client-s3';
import { createS3Client, s3Storage, type S3ClientSettings, type S3Storage, type S3StorageOptions } from '../../lib/files/s3-storage.js';

/** A real S3-protocol server (s3rver) on loopback, for tests and benchmarks. */
export interface S3TestServer {
  /** `http://127.0.0.1:<port>` */
  readonly endpoint: string;
  /** A bucket made at start. */
  readonly bucket: string;
  /** Where s3rver keeps the bucket's files (an object is `<key>._S3rver_object`). */
  readonly bucketDirectory: string;
  /** Settings for `s3Storage({ client })`: loopback, path-style, dummy keys (s3rver checks no signature). */
  readonly clientSettings: Required<S3ClientSettings>;
  /** An `s3Storage` on this server's bucket, with its own client (closed by `close()`). */
  createStorage(options?: Omit<S3StorageOptions, 'bucket' | 'client'>): S3Storage;
  /** Multipart uploads started and neither completed nor aborted (their parts sit on the server). */
  listPendingUploads(): Promise<string[]>;
  /** Stops the server, closes the clients it made and removes its directory. */
  close(): Promise<void>;
}

/** The server script beside this file, or beside its TypeScript source when this runs from dist/. */
function findServerScript(): string {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const candidates = [path.join(here, 's3-test-server-process.mjs'), path.join(here, '..', '..', '..', 'spec', 'support', 's3-test-server-process.mjs')];
  const found = candidates.find((candidate) => existsSync(candidate));
  if (!found) throw new Error(`s3-test-server-process.mjs not found (looked in ${candidates.join(', ')})`);
  return found;
}

/**
 * Starts s3rver 3.7 (an npm devDependency, so `npm ci` is all a machine needs) as a child process
 * on 127.0.0.1, port 0, in a fresh temporary directory, with one bucket. It runs in its own
 * process so that its CPU and memory are not counted as ours (benchmarks) and so that several
 * recordbase processes can share it. spec/support/s3-test-server-process.mjs says which gaps of
 * s3rver it fills so that it behaves like S3.
 */
export async function startS3TestServer(options: { bucket?: string } = {}): Promise<S3TestServer> {
  const bucket = options.bucket ?? 'recordbase-test';
  const directory = await fs.mkdtemp(path.join(os.tmpdir(), 'rb-s3rver-'));
  const child: ChildProcess = fork(findServerScript(), [directory, bucket], {
    execArgv: ['--openssl-legacy-provider'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  let port: number;
  try {
    port = await new Promise<number>((resolve, reject) => {
      child.once('message', (message: { port?: number }) => (typeof message?.port === 'number' ? resolve(message.port) : reject(new Error('s3rver sent no port'))));
      child.once('exit', (code) => reject(new Error(`s3rver exited with code ${code} before listening`)));
      child.once('error', reject);
    });
  } catch (error) {
    child.kill('SIGKILL');
    await fs.rm(directory, { recursive: true, force: true });
    throw error;
  }
  const endpoint = `http://127.0.0.1:${port}`;
  const clientSettings: Required<S3ClientSettings> = {
    endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
  };
  const clients: S3Client[] = [];
  const bucketDirectory = path.join(directory, bucket);

  return {
    endpoint,
    bucket,
    bucketDirectory,
    clientSettings,
    createStorage(storageOptions = {}) {
      const client = createS3Client(clientSettings);
      clients.push(client);
      return s3Storage({ ...storageOptions, bucket, client });
    },
    async listPendingUploads() {
      return fs.readdir(path.join(bucketDirectory, '._S3rver_uploads')).catch(() => []);
    },
    async close() {
      for (const client of clients) client.destroy();
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.send('close');
        const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
        await exited;
        clearTimeout(timer);
      }
      await fs.rm(directory, { recursive: true, force: true });
    },
  };
}
