import express, { type NextFunction, type Request, type Response } from 'express';
import { SignJWT } from 'jose';
import { createRecordsRouter, RecordbaseError, type RecordsRouterOptions } from '../../lib/index.js';
import { jwtAuth } from '../../lib/auth/jwt-auth.js';
import { authCollections } from './collections.js';
import { hashPassword, verifyPassword } from './passwords.js';

/** What the example needs from its host: the database, a signing secret (32 bytes or more), where files go. */
export interface AuthExampleOptions {
  /** Absent: the embedded database in `dataDir`. */
  database?: RecordsRouterOptions['database'];
  secret: string;
  dataDir?: string;
  logger?: RecordsRouterOptions['logger'];
}

const ISSUER = 'recordbase-auth-example';
const AUDIENCE = 'recordbase-auth-example';
const TOKEN_LIFETIME = '1h';
const MIN_PASSWORD = 8;
/** scrypt reads all of it: a long password costs the server, so it is bounded. */
const MAX_PASSWORD = 256;
export const MOUNT = '/backend';

/**
 * A host that owns sign-in: POST /signup and POST /signin answer `{ token, record }` (as
 * PocketBase's authWithPassword does, so `pb.authStore.save(token, record)` works), with an HS256
 * JWT signed by `secret`; the records API under /backend accepts it through jwtAuth.
 */
export function createAuthExample(options: AuthExampleOptions) {
  const key = new TextEncoder().encode(options.secret);
  const records = createRecordsRouter({
    collections: authCollections,
    ...(options.database === undefined ? {} : { database: options.database }),
    ...(options.dataDir === undefined ? {} : { dataDir: options.dataDir }),
    ...(options.logger === undefined ? {} : { logger: options.logger }),
    auth: jwtAuth({ secret: options.secret, issuer: ISSUER, audience: AUDIENCE }),
  });
  const users = records.api.collection('users');

  const issue = (userId: string) =>
    new SignJWT({}).setProtectedHeader({ alg: 'HS256' }).setSubject(userId).setIssuer(ISSUER).setAudience(AUDIENCE).setIssuedAt().setExpirationTime(TOKEN_LIFETIME).sign(key);

  const readCredentials = (req: Request, res: Response) => {
    const { email, password } = (req.body ?? {}) as Record<string, unknown>;
    if (typeof email !== 'string' || typeof password !== 'string' || password.length < MIN_PASSWORD || password.length > MAX_PASSWORD) {
      res.status(400).json({ message: `email and a password of ${MIN_PASSWORD} to ${MAX_PASSWORD} characters are required.` });
      return null;
    }
    return { email: email.trim().toLowerCase(), password };
  };

  const app = express();
  app.disable('x-powered-by');
  app.use(MOUNT, records);

  app.post('/signup', express.json({ limit: '4kb' }), async (req, res, next) => {
    try {
      const credentials = readCredentials(req, res);
      if (!credentials) return;
      const name = typeof req.body.name === 'string' ? req.body.name : '';
      const passwordHash = await hashPassword(credentials.password);
      // As a superuser (users' create rule is null), with only the fields this route means to set.
      const created = await users.create({ email: credentials.email, name, passwordHash }, { as: 'superuser' });
      const record = await users.getOne(created.id, { as: { id: created.id } });
      res.status(201).json({ token: await issue(record.id), record });
    } catch (error) {
      next(error);
    }
  });

  app.post('/signin', express.json({ limit: '4kb' }), async (req, res, next) => {
    try {
      const credentials = readCredentials(req, res);
      if (!credentials) return;
      // The e-mail goes in as a query value, never into the filter's text.
      const found = await users.getFullList({ filter: 'email = @request.query.email', query: { email: credentials.email }, as: 'superuser' });
      const user = found[0];
      const stored = typeof user?.passwordHash === 'string' ? user.passwordHash : undefined;
      if (!user || !(await verifyPassword(credentials.password, stored))) {
        res.status(400).json({ message: 'Failed to authenticate.' });
        return;
      }
      const record = await users.getOne(user.id, { as: { id: user.id } });
      res.json({ token: await issue(user.id), record });
    } catch (error) {
      next(error);
    }
  });

  // The sign-in routes' errors in the body the records API uses (an e-mail taken is a 422 on
  // `email`; a body too large or not JSON, from express.json, a 413 or a 400).
  app.use((error: unknown, _req: Request, res: Response, next: NextFunction) => {
    if (res.headersSent) return next(error);
    if (error instanceof RecordbaseError) {
      res.status(error.status).json({ status: error.status, message: error.message, data: error.data });
    } else if (isClientError(error)) {
      res.status(error.status).json({ status: error.status, message: error.message, data: {} });
    } else {
      next(error);
    }
  });

  return { app, records };
}

/** An error of express.json that is the client's (`expose`: its message is safe to show). */
function isClientError(error: unknown): error is { status: number; message: string } {
  const { status, expose } = (error ?? {}) as { status?: unknown; expose?: unknown };
  return expose === true && typeof status === 'number' && status >= 400 && status < 500;
}
