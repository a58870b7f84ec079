import { monitorEventLoopDelay } from 'node:perf_hooks';

/**
 * Runs `work` while sampling the event loop every 10 ms, and reports the longest the loop was
 * blocked meanwhile: the server under test runs in this process, so a request that freezes it
 * shows here. The client's own work (supertest parsing a body) counts too, so keep bodies small.
 */
export async function measureEventLoopLag<T>(work: () => Promise<T>): Promise<{ result: T; maxLagMs: number }> {
  const histogram = monitorEventLoopDelay({ resolution: 10 });
  histogram.enable();
  try {
    const result = await work();
    return { result, maxLagMs: histogram.max / 1e6 };
  } finally {
    histogram.disable();
  }
}
