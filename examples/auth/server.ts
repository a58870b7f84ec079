/**
 * The auth example: sign-up and sign-in with scrypt-hashed passwords, HS256 JWTs, and the
 * records API accepting them through jwtAuth (docs/auth.md).
 *
 *   AUTH_SECRET=$(openssl rand -hex 32) npm run build && node dist/examples/auth/server.js
 *
 * Environment: AUTH_SECRET (required, 32 characters or more), PORT (default 8092),
 * RB_DATA_DIR (default ./rb_data_auth).
 */
import type { AddressInfo } from 'node:net';
import { createAppServer } from '../../lib/index.js';
import { createAuthExample, MOUNT } from './app.js';

const secret = process.env.AUTH_SECRET;
if (!secret || secret.length < 32) {
  console.error('recordbase auth example: set AUTH_SECRET to 32 characters or more (openssl rand -hex 32)');
  process.exit(1);
}
const { app, records } = createAuthExample({ secret, dataDir: process.env.RB_DATA_DIR ?? './rb_data_auth' });
const port = Number(process.env.PORT ?? 8092);
const server = createAppServer(app);
server.listen(port, '127.0.0.1', async () => {
  await records.ready;
  const address = server.address() as AddressInfo;
  console.log(`recordbase auth example on http://${address.address}:${address.port} (POST /signup, POST /signin; API under ${MOUNT}/api)`);
});
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    server.close();
    void records.close().then(() => process.exit(0));
  });
}
