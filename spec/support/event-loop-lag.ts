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

/**
 * Runs `work` `runs` times in turn and reports the least of the runs' longest blocks: a stall
 * that comes from the machine (a garbage collection, another process on a busy host) hits one
 * run, one that the request itself causes hits every run. For idempotent requests.
 */
export async function measureLeastEventLoopLag<T>(runs: number, work: () => Promise<T>): Promise<{ results: T[]; leastMaxLagMs: number }> {
  const results: T[] = [];
  let least = Number.POSITIVE_INFINITY;
  for (let run = 0; run < runs; run++) {
    const { result, maxLagMs } = await measureEventLoopLag(work);
    results.push(result);
    least = Math.min(least, maxLagMs);
  }
  return { results, leastMaxLagMs: least };
}
