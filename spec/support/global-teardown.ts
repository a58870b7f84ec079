import type { PgBouncer } from './pgbouncer.js';

/** Where global setup left the run's PgBouncer (global-setup.ts's RUN_PGBOUNCER). */
const RUN_PGBOUNCER = Symbol.for('recordbase.test.pgbouncer');

/**
 * Runs once after all test files. Stops the run's PgBouncer (the `pgbouncer` engine) that global
 * setup started.
 *
 * On a machine with two cores jest runs every file in its own process (one worker means in band),
 * so a server, socket or worker that a test forgot keeps that process, and CI, waiting until CI's
 * own time runs out; jest only prints that it "did not exit". That happened once (a test
 * reassigned its router over one still listening). So: if the process is still alive a minute
 * after the run, say what holds it and exit 1.
 */
export default async function globalTeardown(): Promise<void> {
  const slot = globalThis as Record<symbol, PgBouncer | undefined>;
  const bouncer = slot[RUN_PGBOUNCER];
  slot[RUN_PGBOUNCER] = undefined;
  await bouncer?.destroy();
  const watchdog = setTimeout(() => {
    const held = process.getActiveResourcesInfo().filter((kind) => kind !== 'Timeout');
    console.error(
      `\n*** jest has not exited 60 s after its run: still open: ${held.join(', ') || 'nothing but timers'}. ` +
        'A test left a server, connection or worker open (find it with --detectOpenHandles). Exiting with 1. ***\n',
    );
    process.exit(1);
  }, 60_000);
  watchdog.unref();
}
