import { spawn } from 'node:child_process';
import path from 'node:path';
import { PROJECT_ROOT } from '../../support/server-process';
import { SPEC_PATH } from './spec';

const PRISM_JS = path.join(
  PROJECT_ROOT,
  'node_modules',
  '@stoplight',
  'prism-cli',
  'dist',
  'index.js',
);
const START_TIMEOUT_MS = 30_000;

export interface RunningPrism {
  readonly baseUrl: string;
  output(): string;
  stop(): Promise<void>;
}

/** Prism's line once it listens; with `--port 0`, the address holds the port it was given. */
const LISTENING = /Prism is listening on (http:\/\/127\.0\.0\.1:\d+)/;

/**
 * Starts `prism proxy openapi.yaml <upstream> --errors` on loopback. With `validateRequests`, Prism
 * refuses requests the contract does not allow; without it, it forwards everything, so the server's
 * own error answers are checked too. Either way it checks every response against the contract.
 */
export async function startPrism(
  upstream: string,
  { validateRequests }: { validateRequests: boolean },
): Promise<RunningPrism> {
  const args = [PRISM_JS, 'proxy', SPEC_PATH, upstream, '--errors', '--cors=false'];
  args.push(
    '--host',
    '127.0.0.1',
    // Port 0: the system picks a free port as Prism binds it, so no other process can take it first.
    '--port',
    '0',
    `--validate-request=${validateRequests}`,
  );
  const child = spawn(process.execPath, args, {
    cwd: PROJECT_ROOT,
    env: { PATH: process.env['PATH'] ?? '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  // Last resort if the test process exits without its hooks having run.
  process.once('exit', () => child.kill('SIGKILL'));
  let output = '';
  const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
  };
  const listening = new Promise<string>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error('Prism did not listen in time')),
      START_TIMEOUT_MS,
    );
    const collect = (chunk: Buffer) => {
      output += chunk.toString('utf8');
      const address = LISTENING.exec(output);
      if (address !== null) {
        clearTimeout(timer);
        resolve(address[1]!);
      }
    };
    child.stdout.on('data', collect);
    child.stderr.on('data', collect);
    void exited.then(() => {
      clearTimeout(timer);
      reject(new Error('Prism exited before listening'));
    });
  });
  let baseUrl: string;
  try {
    baseUrl = await listening;
  } catch (error) {
    await stop();
    throw new Error(`${(error as Error).message}. Its output:\n${output}`);
  }
  return { baseUrl, output: () => output, stop };
}
