import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

/** The project root, two levels above test/support/. */
export const PROJECT_ROOT = path.resolve(__dirname, '..', '..');
const MAIN_JS = path.join(PROJECT_ROOT, 'dist', 'src', 'main.js');
const TOKEN_JS = path.join(PROJECT_ROOT, 'dist', 'scripts', 'token.js');

/** How long a child may take to start listening or to exit before it is killed and the test fails. */
const DEFAULT_TIMEOUT_MS = 10_000;
/** Only these are passed on from the test runner's environment (not NODE_ENV=test from jest). */
const INHERITED = ['PATH', 'SYSTEMROOT', 'TMPDIR', 'TEMP', 'TMP'];

/** Extra environment for a child; `undefined` removes a variable that a default would set. */
export type ChildEnv = Readonly<Record<string, string | undefined>>;

/** Preloads the disk whose fdatasyncs fail or stop answering on cue (failing-fdatasync.js). */
const DISK_PRELOAD: ChildEnv = {
  NODE_OPTIONS: `--require ${path.join(PROJECT_ROOT, 'test', 'support', 'failing-fdatasync.js')}`,
};

/**
 * The environment of a server process whose disk fails every fdatasync while the file `flag`
 * exists, or only those of files whose path ends with `ofFilesEndingWith`
 * (test/support/failing-fdatasync.js); its workers, under WORKERS, inherit it.
 */
export function failingDiskEnv(flag: string, ofFilesEndingWith?: string): ChildEnv {
  return { ...DISK_PRELOAD, FAIL_FDATASYNC_WHILE: flag, FAIL_FDATASYNC_OF: ofFilesEndingWith };
}

/**
 * The environment of a server whose fdatasyncs stop answering while the file `flag` exists: those
 * of files whose path ends with the flag's content, or all when it is empty. Each holds its thread
 * until answerHungDisk (test/support/failing-fdatasync.js); the FIFO they wait on is made here.
 */
export function hangingDiskEnv(flag: string): ChildEnv {
  execFileSync('mkfifo', [`${flag}.fifo`]);
  return { ...DISK_PRELOAD, HANG_FDATASYNC_WHILE: flag };
}

/** The FIFOs answerHungDisk holds open, closed by cleanupChildren. */
const heldFifos: number[] = [];

/**
 * Has the disk of hangingDiskEnv(flag) answer again: the flag goes, so no later sync waits, and
 * the FIFO gets a writer, held open until cleanupChildren, so that every sync waiting returns and
 * one about to wait does not (an open for reading and writing never blocks on Linux).
 */
export function answerHungDisk(flag: string): void {
  fs.rmSync(flag, { force: true });
  heldFifos.push(fs.openSync(`${flag}.fifo`, 'r+'));
}

const DEV_TOKEN_LINE =
  /^Created a development token \(shown once, stored only as a hash\): (plnt_\S+)$/gm;

const liveChildren = new Set<ChildProcess>();
const tempDirs = new Set<string>();

function childEnv(...layers: ChildEnv[]): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const name of INHERITED) {
    const value = process.env[name];
    if (value !== undefined) env[name] = value;
  }
  for (const layer of layers) {
    for (const [name, value] of Object.entries(layer)) {
      if (value === undefined) delete env[name];
      else env[name] = value;
    }
  }
  return env;
}

interface Spawned {
  readonly child: ChildProcess;
  readonly stdout: () => string;
  readonly stderr: () => string;
  readonly output: () => string;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function spawnTracked(
  script: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  stdoutFd?: number,
): Spawned {
  const child = spawn(process.execPath, [script, ...args], {
    cwd: PROJECT_ROOT,
    env,
    stdio: ['ignore', stdoutFd ?? 'pipe', 'pipe'],
  });
  liveChildren.add(child);
  let stdout = '';
  let stderr = '';
  let output = '';
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
    output += chunk;
  });
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
    output += chunk;
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>(
    (resolve, reject) => {
      child.once('error', (error) => {
        liveChildren.delete(child);
        reject(error);
      });
      // 'close' (not 'exit') so that every byte of stdout and stderr has been read.
      child.once('close', (code, signal) => {
        liveChildren.delete(child);
        resolve({ code, signal });
      });
    },
  );
  exited.catch(() => undefined);
  return { child, stdout: () => stdout, stderr: () => stderr, output: () => output, exited };
}

async function withinTimeout<T>(
  promise: Promise<T>,
  ms: number,
  onTimeout: () => Error,
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(onTimeout()), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** The `url` of the first JSON log line whose message is "listening", if any. */
function listeningUrl(stdout: string): string | undefined {
  for (const line of stdout.split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      const entry = JSON.parse(line) as { message?: unknown; url?: unknown };
      if (entry.message === 'listening' && typeof entry.url === 'string') return entry.url;
    } catch {
      // Not a log line (or not complete yet).
    }
  }
  return undefined;
}

/** Every development token the server printed so far. */
export function developmentTokens(output: string): string[] {
  return [...output.matchAll(DEV_TOKEN_LINE)].map((match) => match[1]!);
}

export interface ServerOptions {
  readonly sqlitePath: string;
  readonly env?: ChildEnv;
  readonly timeoutMs?: number;
  /**
   * Standard output to this descriptor instead of a pipe the test reads: then `env` must give the
   * PORT, and the server has started once `/healthz` answers there.
   */
  readonly stdoutFd?: number;
}

/** A loopback port free at the moment of asking. */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Resolves with the base URL once `/healthz` answers 200 on `port`, polling. */
async function healthyAt(port: string, exited: Promise<unknown>): Promise<string> {
  const baseUrl = `http://127.0.0.1:${port}`;
  let gone = false;
  void exited.then(
    () => (gone = true),
    () => (gone = true),
  );
  while (!gone) {
    const healthy = await fetch(`${baseUrl}/healthz`).then(
      (response) => response.status === 200,
      () => false,
    );
    if (healthy) return baseUrl;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error('exited');
}

export interface RunningServer {
  readonly baseUrl: string;
  readonly process: ChildProcess;
  /** Everything written to stdout and stderr so far, interleaved. */
  output(): string;
  stdout(): string;
  stderr(): string;
  /** Sends the signal and resolves with the exit code once the process has exited. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  /** SIGKILL: the process gets no chance to clean up. */
  kill(): Promise<void>;
  /**
   * Once the process exits by itself: its exit code, or the signal that ended it; or, if it is
   * still running `withinMs` after the call, `still running after <withinMs> ms`.
   */
  ended(withinMs: number): Promise<number | string>;
}

function serverEnv({ sqlitePath, env = {} }: ServerOptions): NodeJS.ProcessEnv {
  return childEnv(
    { PORT: '0', HOST: '127.0.0.1', VALIDATE_RESPONSES: 'true', SQLITE_PATH: sqlitePath },
    env,
  );
}

/** Starts `node dist/src/main.js` and resolves once it logged "listening"; rejects with its output otherwise. */
export async function startServer(options: ServerOptions): Promise<RunningServer> {
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const spawned = spawnTracked(MAIN_JS, [], serverEnv(options), options.stdoutFd);
  const { child } = spawned;
  const describe = (what: string) =>
    new Error(`The server ${what}. Its output:\n${spawned.output()}`);

  const port = options.env?.['PORT'];
  if (options.stdoutFd !== undefined && port === undefined) {
    throw new Error('startServer: give the PORT of a server whose standard output is not read');
  }
  const listening = new Promise<string>((resolve, reject) => {
    if (options.stdoutFd !== undefined) {
      healthyAt(port!, spawned.exited).then(resolve, () =>
        spawned.exited.then(({ code, signal }) =>
          reject(describe(`exited (code ${code}, signal ${signal}) before answering /healthz`)),
        ),
      );
      return;
    }
    const check = () => {
      const url = listeningUrl(spawned.stdout());
      if (url !== undefined) {
        child.stdout?.off('data', check);
        resolve(url);
      }
    };
    child.stdout?.on('data', check);
    spawned.exited.then(
      ({ code, signal }) =>
        reject(describe(`exited (code ${code}, signal ${signal}) before listening`)),
      (error: unknown) => reject(error),
    );
  });
  let baseUrl: string;
  try {
    baseUrl = await withinTimeout(listening, timeoutMs, () =>
      describe(`did not listen within ${timeoutMs} ms`),
    );
  } catch (error) {
    child.kill('SIGKILL');
    await spawned.exited.catch(() => undefined);
    throw error;
  }

  return {
    baseUrl,
    process: child,
    output: spawned.output,
    stdout: spawned.stdout,
    stderr: spawned.stderr,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      const { code } = await withinTimeout(spawned.exited, timeoutMs, () => {
        child.kill('SIGKILL');
        return describe(`did not exit within ${timeoutMs} ms of ${signal}`);
      });
      return code;
    },
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await spawned.exited;
    },
    ended(withinMs) {
      let timer: NodeJS.Timeout | undefined;
      const running = new Promise<string>((resolve) => {
        timer = setTimeout(resolve, withinMs, `still running after ${withinMs} ms`);
      });
      // On exit Node gives either a code or a signal, never neither.
      const status = spawned.exited.then(({ code, signal }) => (code ?? signal) as number | string);
      return Promise.race([status, running]).finally(() => clearTimeout(timer));
    },
  };
}

/**
 * Starts the server (on a fresh temporary SQLite file unless `sqlitePath` says otherwise) and
 * returns it with the development token it printed on its first start.
 */
export async function startWithToken(
  options: Partial<ServerOptions> = {},
): Promise<{ server: RunningServer; token: string }> {
  const server = await startServer({ sqlitePath: tempSqlitePath(), ...options });
  const token = developmentTokens(server.output())[0];
  if (token === undefined)
    throw new Error(`The server printed no development token:\n${server.output()}`);
  return { server, token };
}

export interface Finished {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
  readonly durationMs: number;
}

async function runToExit(
  script: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  timeoutMs: number,
): Promise<Finished> {
  const started = Date.now();
  const spawned = spawnTracked(script, args, env);
  const { code, signal } = await withinTimeout(spawned.exited, timeoutMs, () => {
    spawned.child.kill('SIGKILL');
    return new Error(
      `${path.basename(script)} ${args.join(' ')} did not exit within ${timeoutMs} ms:\n${spawned.output()}`,
    );
  });
  return {
    code,
    signal,
    stdout: spawned.stdout(),
    stderr: spawned.stderr(),
    durationMs: Date.now() - started,
  };
}

/** Runs the server expecting it to exit by itself (a refused start); fails if it runs past the timeout. */
export function runServerToExit(options: ServerOptions): Promise<Finished> {
  return runToExit(MAIN_JS, [], serverEnv(options), options.timeoutMs ?? DEFAULT_TIMEOUT_MS);
}

/**
 * Runs `node dist/scripts/token.js ...args` with only the given environment (plus PATH); `code` is
 * its exit code, or the signal that ended it.
 */
export async function runTokenCli(
  args: readonly string[],
  env: ChildEnv,
): Promise<{ code: number | string | null; stdout: string; stderr: string }> {
  const { code, signal, stdout, stderr } = await runToExit(
    TOKEN_JS,
    args,
    childEnv(env),
    DEFAULT_TIMEOUT_MS,
  );
  return { code: code ?? signal, stdout, stderr };
}

/** Creates a token with the CLI in the given store and returns its id and secret. */
export async function createTokenWithId(
  sqlitePath: string,
  name: string,
): Promise<{ id: string; secret: string }> {
  const result = await runTokenCli(['create', '--name', name], { SQLITE_PATH: sqlitePath });
  const match = /^Created token (\S+) \(([^\n]*)\)\.[^\n]*\n(plnt_\S+)\n$/.exec(result.stdout);
  if (result.code !== 0 || match === null) {
    throw new Error(`token create failed (code ${result.code}):\n${result.stdout}${result.stderr}`);
  }
  return { id: match[1]!, secret: match[3]! };
}

/** Creates a token with the CLI in the given store and returns its secret. */
export async function createToken(sqlitePath: string, name: string): Promise<string> {
  return (await createTokenWithId(sqlitePath, name)).secret;
}

/** A path for a new SQLite file in a fresh temporary directory, removed by cleanupChildren(). */
export function tempSqlitePath(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'plant-store-e2e-'));
  tempDirs.add(dir);
  return path.join(dir, 'plants.sqlite');
}

/** SIGKILLs every child still running and removes the temporary directories; for afterEach/afterAll. */
export async function cleanupChildren(): Promise<void> {
  const waiting = [...liveChildren].map(
    (child) =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once('close', () => resolve());
        child.kill('SIGKILL');
      }),
  );
  await Promise.all(waiting);
  liveChildren.clear();
  for (const fd of heldFifos.splice(0)) fs.closeSync(fd);
  for (const dir of tempDirs) fs.rmSync(dir, { recursive: true, force: true });
  tempDirs.clear();
}

// Last resort if the test process exits without the hooks having run.
process.once('exit', () => {
  for (const child of liveChildren) child.kill('SIGKILL');
});

/** One request to a running server with a bearer token and, when given, a raw JSON body. */
export function callApi(
  server: Pick<RunningServer, 'baseUrl'>,
  token: string,
  method: string,
  path: string,
  body?: string,
): Promise<Response> {
  return fetch(`${server.baseUrl}${path}`, {
    method,
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    ...(body === undefined ? {} : { body }),
    signal: AbortSignal.timeout(10_000),
  });
}
