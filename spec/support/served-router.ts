import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import PocketBase from 'pocketbase';
import { createAppServer, type RecordsRouter } from '../../lib/index.js';

/** A router the test made itself (its own dataDir, engine and options), mounted at /backend on a real listening server. */
export interface ServedRouter {
  router: RecordsRouter;
  /** `http://127.0.0.1:<port>/backend`: what the SDK is given. */
  baseUrl: string;
  /** Stops the server, then closes the router. */
  close(): Promise<void>;
}

/**
 * Serves `router` once it is ready, as a host app does (createAppServer, an ephemeral port on
 * loopback): for tests whose router cannot come from startTestApp, such as one that opens the
 * embedded engine on disk itself, which is what backups copy.
 */
export async function serveRouter(router: RecordsRouter): Promise<ServedRouter> {
  await router.ready;
  const app = express();
  app.use('/backend', router);
  const server: Server = createAppServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    router,
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/backend`,
    async close() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await router.close();
    },
  };
}

/** The pocketbase SDK pointed at a served router, signed in with `token` when given. */
export function sdkOf(served: { baseUrl: string }, token?: string): PocketBase {
  const pb = new PocketBase(served.baseUrl);
  pb.autoCancellation(false);
  if (token) pb.authStore.save(token, null);
  return pb;
}
