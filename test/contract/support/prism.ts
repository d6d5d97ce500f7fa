import { spawn } from 'node:child_process';
import net from 'node:net';
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

/** A free loopback port, found by binding port 0 and closing again. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as net.AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}

/**
 * Starts `prism proxy openapi.yaml <upstream> --errors` on loopback. With `validateRequests`, Prism
 * refuses requests the contract does not allow; without it, it forwards everything, so the server's
 * own error answers are checked too. Either way it checks every response against the contract.
 */
export async function startPrism(
  upstream: string,
  { validateRequests }: { validateRequests: boolean },
): Promise<RunningPrism> {
  const port = await freePort();
  const args = [PRISM_JS, 'proxy', SPEC_PATH, upstream, '--errors', '--cors=false'];
  args.push(
    '--host',
    '127.0.0.1',
    '--port',
    String(port),
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
  const listening = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error('Prism did not listen in time')),
      START_TIMEOUT_MS,
    );
    const collect = (chunk: Buffer) => {
      output += chunk.toString('utf8');
      if (output.includes('Prism is listening on')) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout.on('data', collect);
    child.stderr.on('data', collect);
    void exited.then(() => {
      clearTimeout(timer);
      reject(new Error('Prism exited before listening'));
    });
  });
  try {
    await listening;
  } catch (error) {
    await stop();
    throw new Error(`${(error as Error).message}. Its output:\n${output}`);
  }
  return { baseUrl: `http://127.0.0.1:${port}`, output: () => output, stop };
}
