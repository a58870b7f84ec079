/** What the machine is and how busy it is, so that every printed result says where it came from. */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';

/** One line: cores, CPU model, RAM, Node. */
export function describeMachine(): string {
  const cpu = /model name\s*:\s*(.+)/.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1] ?? os.cpus()[0]?.model ?? 'unknown CPU';
  return `${os.availableParallelism()} cores (${cpu}), ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB RAM, ${os.type()} ${os.release()}, Node ${process.version}`;
}

/** Processes (other than ours) whose command line mentions `jest`: another engineer's test run. */
export function countJestProcesses(): number {
  let count = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes('jest')) count++;
    } catch {
      // gone meanwhile
    }
  }
  return count;
}

/** The 1/5/15 minute load averages. */
export function describeLoad(): string {
  return os.loadavg().map((n) => n.toFixed(2)).join(' / ');
}

/** VmRSS (now) and VmHWM (peak) of a process, in MiB, from /proc/<pid>/status. */
export function readMemory(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (name: string) => Number(new RegExp(`${name}:\\s+(\\d+) kB`).exec(status)?.[1] ?? NaN);
  return { rss: kib('VmRSS') / 1024, peak: kib('VmHWM') / 1024 };
}

/** How many threads a process runs now (`Threads` of /proc/<pid>/status): a thumbnail worker is one. */
export function readThreadCount(pid: number): number {
  return Number(/Threads:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN);
}

/**
 * Starts a new peak for a process's VmHWM (writes `5` to /proc/<pid>/clear_refs), so that the
 * peak read after a cell is that cell's own. False where the kernel refuses (then VmHWM stays the
 * peak since start).
 */
export function resetPeakMemory(pid: number): boolean {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}

/**
 * CPU seconds each Postgres server process on this machine has used so far (every process named
 * `postgres`: the backends of both servers' pools, and the server's own workers), by pid. The
 * difference of two readings (databaseCpuSecondsBetween) is what the database did meanwhile.
 */
export function readDatabaseCpuSeconds(): Map<number, number> {
  const byPid = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() !== 'postgres') continue;
      const { user, system } = readCpuSeconds(Number(entry));
      byPid.set(Number(entry), user + system);
    } catch {
      // The process ended while we looked.
    }
  }
  return byPid;
}

/** Postgres CPU seconds between two readings: a process that started meanwhile counts whole; one that ended is lost. */
export function databaseCpuSecondsBetween(before: ReadonlyMap<number, number>, after: ReadonlyMap<number, number>): number {
  let seconds = 0;
  for (const [pid, now] of after) seconds += now - (before.get(pid) ?? 0);
  return seconds;
}

/** CPU seconds a process has used so far (user and system), from /proc/<pid>/stat (clock ticks of 1/100 s). */
export function readCpuSeconds(pid: number): { user: number; system: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may contain spaces) start at the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { user: Number(fields[11]) / 100, system: Number(fields[12]) / 100 };
}
