/**
 * One options module for the host app and the `recordbase` executable (docs/configuration.md,
 * "One config for the app and the executable"): server.ts imports it and mounts the router;
 * `recordbase migrate | backup | types | serve --config examples/shared-config/recordbase.config.ts`
 * reads the same collections, dataDir, migrations, auth and backups, so they never drift apart.
 * A `.ts` config is loaded as it is (no build step); the app gets it compiled with the rest.
 */
import type { Identity, RecordsRouterOptions } from '../../lib/index.js';

// A stand-in for the host's real authentication, for local use only: one fixed superuser token.
const tokens: Record<string, Identity> = { 'shared-admin': { id: 'sharedadmin0000', superuser: true } };

const options: RecordsRouterOptions = {
  dataDir: process.env.RB_DATA_DIR ?? './rb_data_shared',
  collections: [
    {
      name: 'tasks',
      fields: [
        { name: 'title', type: 'text', required: true, max: 200 },
        { name: 'done', type: 'bool' },
      ],
      rules: { list: '', view: '', create: '@request.auth.id != ""', update: '@request.auth.id != ""', delete: null },
    },
  ],
  auth: (token) => tokens[token] ?? null,
  dashboard: true,
  backups: { maxCount: 5 },
};

export default options;
