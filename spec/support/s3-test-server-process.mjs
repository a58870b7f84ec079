// The S3-protocol server of our tests and benchmarks: s3rver 3.7 on 127.0.0.1, run as its own
// process by spec/support/s3-test-server.ts (which documents it). Plain JavaScript because it runs
// outside Jest and before any build.
//
// Node must run it with --openssl-legacy-provider: s3rver signs ListObjectsV2 continuation tokens
// with DES, which OpenSSL 3 only has in its legacy provider, so without it every listing longer
// than one page fails with InternalError.
//
// Three gaps of s3rver are filled in front of it, so that it behaves like S3 where the storage
// contract depends on it:
// - AbortMultipartUpload (s3rver answers 405) removes the upload's parts;
// - PutObject is atomic (s3rver writes the object file in place, so a reader or a second writer
//   could see half an object; S3 never shows one);
// - a Range on an empty object is 416, as on S3 (s3rver promises one byte and sends none).
// Every byte still goes through the S3 protocol and s3rver's own filesystem store.
//
// Arguments: <directory> <bucket>. Sends {port} over IPC once listening; stops on "close".
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import S3rver from 's3rver';

const [directory, bucket] = process.argv.slice(2);
if (!directory || !bucket) throw new Error('usage: s3-test-server-process.mjs <directory> <bucket>');
/** Where atomic PutObject stages its files: a bucket nobody lists. */
const STAGING_BUCKET = '.rb-staging';

const server = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory, vhostBuckets: false, configureBuckets: [{ name: bucket }] });
const store = server.store;
const uploadsDir = path.join(directory, bucket, '._S3rver_uploads');

server.middleware.unshift(async (ctx, next) => {
  if (ctx.method === 'GET' && ctx.headers.range !== undefined && ctx.path.startsWith(`/${bucket}/`)) {
    const key = decodeURIComponent(ctx.path.slice(bucket.length + 2));
    const size = await fs.stat(store.getResourcePath(bucket, key, 'object')).then((info) => info.size, () => undefined);
    if (size === 0) {
      ctx.status = 416;
      ctx.type = 'application/xml';
      ctx.body = '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>InvalidRange</Code><Message>The requested range is not satisfiable</Message></Error>';
      return;
    }
  }
  const uploadId = ctx.query.uploadId;
  if (ctx.method === 'DELETE' && typeof uploadId === 'string') {
    if (!/^[A-Za-z0-9]+$/.test(uploadId)) {
      ctx.status = 400;
      return;
    }
    await fs.rm(path.join(uploadsDir, uploadId), { recursive: true, force: true });
    ctx.status = 204;
    ctx.body = '';
    return;
  }
  await next();
});

const putInPlace = store.putObject.bind(store);
store.putObject = async (object) => {
  // s3rver writes into the staging bucket; its files then move into place, the object last.
  const stagingKey = `put-${randomBytes(8).toString('hex')}`;
  const result = await putInPlace({ ...object, bucket: STAGING_BUCKET, key: stagingKey });
  const target = store.getResourcePath(object.bucket, object.key, 'object');
  await fs.mkdir(path.dirname(target), { recursive: true });
  for (const resource of ['metadata.json', 'object.md5', 'object']) {
    await fs.rename(store.getResourcePath(STAGING_BUCKET, stagingKey, resource), store.getResourcePath(object.bucket, object.key, resource));
  }
  return result;
};

const address = await server.run();
process.send?.({ port: address.port });
process.on('message', (message) => {
  if (message === 'close') void server.close().finally(() => process.exit(0));
});
// The parent's end is ours: never outlive it.
process.on('disconnect', () => process.exit(0));
