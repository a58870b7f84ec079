/**
 * The baseline: what a competent hand-written Express + pg server (no Knex, no recordbase) does
 * for the same requests, with the same SQL for reads (one plain statement per write) and the same
 * JSON, so its throughput is the stack's own limit on this machine. It knows the bench's one query shape instead of parsing a filter
 * language, runs no rule engine and serialises with `toISOString`: everything recordbase does on
 * top of that is what the ratio measures. Forked by the runner; sends `{ type: 'ready', port }`.
 *
 * Its create is a plain `INSERT ... RETURNING *`, as a hand-written app writes it: the author's
 * format is checked, its existence is not (recordbase checks it, in the same statement or the same
 * transaction). BENCH_BASELINE_CREATE=exists brings back the earlier baseline, whose INSERT checks
 * the author with `WHERE EXISTS (SELECT 1 FROM users ...)` (the results before issue 35).
 *
 * Env: BENCH_DATABASE_URL, BENCH_SCHEMA, BENCH_DATA_DIR (recordbase's storage is read from
 * `storage/` there for thumbnails; uploads go to `baseline-uploads/`), BENCH_BASELINE_CREATE.
 */
import { createHash, randomBytes, randomInt } from 'node:crypto';
import { createReadStream, promises as fs } from 'node:fs';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import express, { type Request, type Response } from 'express';
import multer from 'multer';
import pg from 'pg';
import { POSTS_ID, SEARCH_LANGUAGE, THUMB, USERS_ID } from './bench-data.js';
import { serveBenchApp } from './bench-processes.js';

const schema = process.env.BENCH_SCHEMA!;
const dataDir = process.env.BENCH_DATA_DIR!;
if (!/^[a-z_][a-z0-9_]*$/.test(schema)) throw new Error(`bad schema name ${schema}`);
const posts = `"${schema}"."posts"`;
const users = `"${schema}"."users"`;
const storageRoot = path.join(dataDir, 'storage');
const uploadDir = path.join(dataDir, 'baseline-uploads');
await fs.mkdir(uploadDir, { recursive: true });

const pool = new pg.Pool({ connectionString: process.env.BENCH_DATABASE_URL, max: 10 });
// A hand-written app has no realtime: its writes to the shared tables skip recordbase's capture
// triggers (`replica` fires only ALWAYS and REPLICA triggers; the bench connects as a superuser).
pool.on('connect', (client) => {
  client.query('SET session_replication_role = replica').catch((err: unknown) => console.error(err));
});

type Row = Record<string, unknown>;

const date = (d: unknown) => (d as Date).toISOString().replace('T', ' ');

function shapePost(r: Row): Row {
  return {
    collectionId: POSTS_ID,
    collectionName: 'posts',
    id: r.id,
    title: r.title,
    body: r.body,
    views: r.views,
    published: r.published,
    author: r.author,
    cover: r.cover,
    created: date(r.created),
    updated: date(r.updated),
  };
}

function shapeUser(r: Row): Row {
  return { collectionId: USERS_ID, collectionName: 'users', id: r.id, name: r.name, email: r.email, created: date(r.created), updated: date(r.updated) };
}

function fail(res: Response, status: number, message: string, data: Row = {}): void {
  res.status(status).json({ status, message, data });
}

const app = express();

// The hand-written form of `filter=published = true && views >= 100&sort=-created`.
const LIST_WHERE = 'published = $1 AND views >= $2';
// The columns a post answers with, named: where posts have a search index, `*` would also read its vector.
const POST_COLUMNS = 'id, title, body, views, published, author, cover, created, updated';

/**
 * The search cell's column (`--scenarios search`): the generated tsvector recordbase's schema sync
 * made, which a hand-written app would have declared itself. Undefined on tables without one.
 */
const searchColumn: string | undefined = (
  await pool.query<{ column_name: string }>(`SELECT column_name FROM information_schema.columns WHERE table_schema = $1 AND table_name = 'posts' AND data_type = 'tsvector'`, [schema])
).rows[0]?.column_name;

/** The hand-written form of `search=<words>&sort=-@rank`: the match, ranked, newest id first among equals (recordbase's tie-breaker). */
async function searchPosts(text: string, perPage: number, offset: number): Promise<Row[]> {
  const vector = `"${searchColumn!.replace(/"/g, '""')}"`;
  const query = `websearch_to_tsquery('${SEARCH_LANGUAGE}'::regconfig, $1)`;
  const { rows } = await pool.query(`SELECT ${POST_COLUMNS} FROM ${posts} WHERE ${vector} @@ ${query} ORDER BY ts_rank(${vector}, ${query}) DESC, id DESC LIMIT $2 OFFSET $3`, [text, perPage, offset]);
  return rows;
}

app.get('/backend/api/collections/posts/records', async (req, res) => {
  const page = Number(req.query.page ?? 1);
  const perPage = Math.min(Number(req.query.perPage ?? 30), 1000);
  if (!Number.isInteger(page) || page < 1 || !Number.isInteger(perPage) || perPage < 1) return fail(res, 400, 'Bad paging.');
  const skipTotal = req.query.skipTotal === '1' || req.query.skipTotal === 'true';
  if (typeof req.query.search === 'string') {
    if (searchColumn === undefined || !skipTotal) return fail(res, 400, 'The baseline searches with skipTotal only, on posts with a search index.');
    const found = await searchPosts(req.query.search, perPage, (page - 1) * perPage);
    return res.json({ page, perPage, totalItems: -1, totalPages: -1, items: found.map(shapePost) });
  }
  const { rows } = await pool.query(`SELECT ${POST_COLUMNS} FROM ${posts} WHERE ${LIST_WHERE} ORDER BY created DESC, id DESC LIMIT $3 OFFSET $4`, [
    true,
    100,
    perPage,
    (page - 1) * perPage,
  ]);
  let totalItems = -1;
  if (!skipTotal) totalItems = (await pool.query(`SELECT count(*)::int AS n FROM ${posts} WHERE ${LIST_WHERE}`, [true, 100])).rows[0].n;
  const items = rows.map(shapePost);
  if (req.query.expand === 'author' && rows.length > 0) {
    const authors = await pool.query(`SELECT * FROM ${users} WHERE id = ANY($1::text[])`, [[...new Set(rows.map((r) => r.author))]]);
    const byId = new Map(authors.rows.map((u) => [u.id, shapeUser(u)]));
    items.forEach((item) => {
      const author = byId.get(item.author);
      if (author) item.expand = { author };
    });
  }
  res.json({ page, perPage, totalItems, totalPages: skipTotal ? -1 : Math.ceil(totalItems / perPage), items });
});

app.get('/backend/api/collections/posts/records/:id', async (req, res) => {
  const { rows } = await pool.query(`SELECT ${POST_COLUMNS} FROM ${posts} WHERE id = $1`, [req.params.id]);
  if (rows.length === 0) return fail(res, 404, "The requested record wasn't found.");
  res.json(shapePost(rows[0]));
});

// The hand-written form of `groupBy=author&fields=count(),sum(views)`: the groups' number and one page of them, by author.
app.get('/backend/api/collections/posts/aggregate', async (req, res) => {
  const page = Number(req.query.page ?? 1);
  const perPage = Math.min(Number(req.query.perPage ?? 30), 1000);
  if (!Number.isInteger(page) || page < 1 || !Number.isInteger(perPage) || perPage < 1) return fail(res, 400, 'Bad paging.');
  if (req.query.groupBy !== 'author' || req.query.fields !== 'count(),sum(views)') return fail(res, 400, 'The baseline aggregates posts by author only.');
  // recordbase's statement shape: the groups (at most the cap and one), their number, and one page of them.
  const { rows } = await pool.query(
    `WITH g AS (SELECT author, count(*)::float8 AS count, sum(views) AS sum_views FROM ${posts} GROUP BY author LIMIT 1001)
     SELECT (SELECT count(*) FROM g)::int AS total, p.* FROM (SELECT 1) AS one LEFT JOIN LATERAL (SELECT g.* FROM g ORDER BY author LIMIT $1 OFFSET $2) AS p ON TRUE`,
    [perPage, (page - 1) * perPage],
  );
  const totalItems = rows[0]?.total ?? 0;
  const groups = rows.filter((r) => r.author !== null);
  res.json({ page, perPage, totalItems, totalPages: Math.ceil(totalItems / perPage), items: groups.map((r) => ({ author: r.author, count: r.count, sum_views: r.sum_views })) });
});

const ID_ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';
const newId = () => Array.from({ length: 15 }, () => ID_ALPHABET[randomInt(36)]).join('');

const upload = multer({
  storage: multer.diskStorage({
    destination: uploadDir,
    filename: (_req, file, done) => done(null, `${path.parse(file.originalname).name.replace(/[^a-z0-9]+/gi, '_').toLowerCase()}_${randomBytes(5).toString('hex')}.png`),
  }),
  limits: { fileSize: 5 * 1024 * 1024 },
  fileFilter: (_req, file, done) => done(null, ['image/png', 'image/jpeg', 'image/webp'].includes(file.mimetype)),
}).single('cover');

/** The checks recordbase's validator makes for this collection, written out by hand. */
function validatePost(body: Row): Row | string {
  const { title, body: text = '', views = null, published = false, author } = body;
  if (typeof title !== 'string' || title.length < 1 || title.length > 200) return 'title';
  if (typeof text !== 'string' || text.length > 10000) return 'body';
  const number = typeof views === 'string' ? Number(views) : views;
  if (number !== null && (typeof number !== 'number' || !Number.isInteger(number) || number < 0)) return 'views';
  const flag = published === 'true' ? true : published === 'false' ? false : published;
  if (typeof flag !== 'boolean') return 'published';
  if (typeof author !== 'string' || !/^[a-z0-9]{15}$/.test(author)) return 'author';
  return { title, body: text, views: number, published: flag, author };
}

const checkAuthor = process.env.BENCH_BASELINE_CREATE === 'exists';
if (!['exists', 'plain', '', undefined].includes(process.env.BENCH_BASELINE_CREATE)) throw new Error(`BENCH_BASELINE_CREATE must be plain or exists, got ${process.env.BENCH_BASELINE_CREATE}`);
const INSERT_POST = checkAuthor
  ? // The earlier baseline: the relation check and the insert in one statement, atomically.
    `INSERT INTO ${posts} (id, title, body, views, published, author, cover, created, updated)
     SELECT $1, $2, $3, $4, $5, $6, $7, now(), now() WHERE EXISTS (SELECT 1 FROM ${users} WHERE id = $6) RETURNING *`
  : `INSERT INTO ${posts} (id, title, body, views, published, author, cover, created, updated)
     VALUES ($1, $2, $3, $4, $5, $6, $7, now(), now()) RETURNING *`;

/** Inserts one validated post on `client` (the pool, or a batch's connection); undefined when the author check found none. */
async function insertRow(client: pg.Pool | pg.PoolClient, values: Row, cover: string): Promise<Row | undefined> {
  const { rows } = await client.query(INSERT_POST, [newId(), values.title, values.body, values.views, values.published, values.author, cover]);
  return rows[0];
}

const MISSING_AUTHOR = { author: { code: 'validation_missing_rel_records' } };

async function insertPost(res: Response, values: Row, cover: string): Promise<void> {
  const row = await insertRow(pool, values, cover);
  if (!row) return fail(res, 400, 'Failed to create record.', MISSING_AUTHOR);
  res.json(shapePost(row));
}

const json = express.json();

/** The checks of an update of the bench's shape: a title and a view count, both required. */
function validatePatch(body: Row): { title: string; views: number } | string {
  const { title, views } = body;
  if (typeof title !== 'string' || title.length < 1 || title.length > 200) return 'title';
  if (typeof views !== 'number' || !Number.isInteger(views) || views < 0) return 'views';
  return { title, views };
}

app.patch('/backend/api/collections/posts/records/:id', json, async (req: Request, res: Response) => {
  const values = validatePatch(req.body ?? {});
  if (typeof values === 'string') return fail(res, 400, 'Failed to update record.', { [values]: { code: 'validation_invalid' } });
  const { rows } = await pool.query(`UPDATE ${posts} SET title = $1, views = $2, updated = now() WHERE id = $3 RETURNING *`, [values.title, values.views, req.params.id]);
  if (rows.length === 0) return fail(res, 404, "The requested record wasn't found.");
  res.json(shapePost(rows[0]));
});

app.delete('/backend/api/collections/posts/records/:id', async (req: Request, res: Response) => {
  const { rowCount } = await pool.query(`DELETE FROM ${posts} WHERE id = $1`, [req.params.id]);
  if (rowCount === 0) return fail(res, 404, "The requested record wasn't found.");
  res.status(204).end();
});

const BATCH_URL = '/api/collections/posts/records';

/**
 * PocketBase's batch, for the one request it carries here: creates of posts. One transaction on
 * one connection: BEGIN, one INSERT ... RETURNING * per create, COMMIT; all or nothing.
 */
app.post('/backend/api/batch', json, async (req: Request, res: Response) => {
  const requests: unknown = req.body?.requests;
  if (!Array.isArray(requests) || requests.length === 0 || requests.length > 50) return fail(res, 400, 'Batch transaction failed.');
  const checked: Row[] = [];
  for (const [index, request] of (requests as Row[]).entries()) {
    const values = request?.method === 'POST' && request.url === BATCH_URL ? validatePost((request.body as Row) ?? {}) : 'url';
    if (typeof values === 'string') return fail(res, 400, 'Batch transaction failed.', { requests: { [index]: { code: 'batch_request_failed', message: 'Batch request failed.' } } });
    checked.push(values);
  }
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const answers: Row[] = [];
    for (const [index, values] of checked.entries()) {
      const row = await insertRow(client, values, '');
      if (!row) {
        await client.query('ROLLBACK');
        return fail(res, 400, 'Batch transaction failed.', { requests: { [index]: { code: 'batch_request_failed', message: 'Batch request failed.' } } });
      }
      answers.push({ status: 200, body: shapePost(row) });
    }
    await client.query('COMMIT');
    res.json(answers);
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    throw error;
  } finally {
    client.release();
  }
});

app.post('/backend/api/collections/posts/records', async (req: Request, res: Response) => {
  if (req.is('multipart/form-data')) {
    await new Promise<void>((resolve, reject) => upload(req, res, (err: unknown) => (err ? reject(err) : resolve())));
    const values = validatePost(req.body ?? {});
    if (typeof values === 'string') {
      if (req.file) await fs.rm(req.file.path, { force: true });
      return fail(res, 400, 'Failed to create record.', { [values]: { code: 'validation_invalid' } });
    }
    return insertPost(res, values, req.file?.filename ?? '');
  }
  await new Promise<void>((resolve, reject) => express.json()(req, res, (err?: unknown) => (err ? reject(err) : resolve())));
  const values = validatePost(req.body ?? {});
  if (typeof values === 'string') return fail(res, 400, 'Failed to create record.', { [values]: { code: 'validation_invalid' } });
  return insertPost(res, values, '');
});

const CSP = "default-src 'none'; media-src 'self'; style-src 'unsafe-inline'; sandbox";

app.get('/backend/api/files/posts/:recordId/:filename', async (req, res) => {
  const { recordId, filename } = req.params;
  const { rows } = await pool.query(`SELECT cover FROM ${posts} WHERE id = $1`, [recordId]);
  if (rows.length === 0 || rows[0].cover !== filename || !/^[a-z0-9_]+\.[a-z0-9]+$/.test(filename)) return fail(res, 404, "The requested file wasn't found.");
  const key = req.query.thumb === THUMB ? `${POSTS_ID}/${recordId}/thumbs_${filename}/${THUMB}_${filename}` : `${POSTS_ID}/${recordId}/${filename}`;
  const file = path.join(storageRoot, key);
  const info = await fs.stat(file).catch(() => undefined);
  if (!info) return fail(res, 404, "The requested file wasn't found.");
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader('Content-Security-Policy', CSP);
  res.setHeader('Accept-Ranges', 'bytes');
  res.setHeader('Cache-Control', 'public, max-age=2592000, stale-while-revalidate=86400');
  res.setHeader('ETag', `"${info.size.toString(16)}-${Math.floor(info.mtimeMs).toString(16)}-${createHash('sha256').update(key).digest('base64url').slice(0, 12)}"`);
  res.setHeader('Last-Modified', info.mtime.toUTCString());
  res.setHeader('Content-Type', 'image/png');
  res.setHeader('Content-Length', String(info.size));
  res.setHeader('Content-Disposition', `inline; filename="${filename}"`);
  try {
    await pipeline(createReadStream(file), res);
  } catch {
    res.destroy(); // the client left (autocannon cuts its connections when a run ends)
  }
});

app.use((err: unknown, req: Request, res: Response, _next: express.NextFunction) => {
  if (req.socket.destroyed) return; // the client left (autocannon cuts its connections when a run ends)
  console.error(err);
  if (!res.headersSent) fail(res, 500, 'Something went wrong.');
  else res.destroy();
});

serveBenchApp({ app, close: () => pool.end() });
