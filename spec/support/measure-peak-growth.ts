/** Samples the resident set size every 10 ms while `work` runs; resolves with the peak growth in bytes. */
export async function measurePeakGrowth(work: () => Promise<unknown>): Promise<number> {
  global.gc?.();
  const base = process.memoryUsage().rss;
  let peak = base;
  const timer = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage().rss);
  }, 10);
  try {
    await work();
  } finally {
    clearInterval(timer);
  }
  return Math.max(peak, process.memoryUsage().rss) - base;
}
