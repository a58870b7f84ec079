import { execFile, spawn, type ChildProcess } from 'node:child_process';

/** What a node script printed, and its exit code (0, or the code it failed with). */
export interface NodeRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `node <args>` to its end (at most `timeoutMs`) and resolves with its exit code and output, whatever the code. */
export function runNode(args: string[], options: { cwd: string; env?: NodeJS.ProcessEnv; timeoutMs?: number }): Promise<NodeRun> {
  return new Promise((resolve) => {
    execFile(process.execPath, args, { cwd: options.cwd, env: { ...process.env, ...options.env }, timeout: options.timeoutMs ?? 120_000 }, (error, stdout, stderr) => {
      resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

/** A long-running node process started by startNodeUntil: everything it printed so far (stdout and stderr), live. */
export interface StartedNode {
  child: ChildProcess;
  output(): string;
}

/**
 * Starts `node <args>` and resolves once what it printed (stdout and stderr together) matches
 * `until`; rejects, the process killed, when it exits first or prints no match within 60 s.
 */
export function startNodeUntil(args: string[], options: { cwd: string; env?: NodeJS.ProcessEnv; until: RegExp }): Promise<StartedNode> {
  const child = spawn(process.execPath, args, { cwd: options.cwd, env: { ...process.env, ...options.env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`node ${args.join(' ')} printed nothing matching ${options.until} within 60 s:\n${output}`));
    }, 60_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (options.until.test(output)) {
        clearTimeout(timer);
        resolve({ child, output: () => output });
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`node ${args.join(' ')} exited with ${code}:\n${output}`));
    });
  });
}

/** Stops a process started by startNodeUntil with SIGTERM and waits for it to exit. */
export async function stopNode(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}
