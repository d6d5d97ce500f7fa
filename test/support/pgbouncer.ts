import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { TEST_DATABASE_URL, testDatabasePort } from './postgres';
import { freePort } from './server-process';

/** The pgbouncer program (Debian's package puts it in /usr/sbin), or undefined. */
export const PGBOUNCER = [...(process.env['PATH'] ?? '').split(path.delimiter), '/usr/sbin']
  .filter((dir) => dir !== '')
  .map((dir) => path.join(dir, 'pgbouncer'))
  .find((candidate) => {
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });

if (TEST_DATABASE_URL !== undefined && PGBOUNCER === undefined) {
  if (process.env['CI'] === 'true') {
    throw new Error('CI must run the PgBouncer tests: install pgbouncer (.ci/run does).');
  }
  process.stderr.write(
    '\nPgBouncer tests SKIPPED: no pgbouncer program; install it (apt-get install pgbouncer) to ' +
      'run them.\n\n',
  );
}

/** `describe` when PostgreSQL tests run and pgbouncer is installed, else `describe.skip`. */
export const describeWithPgBouncer =
  TEST_DATABASE_URL === undefined || PGBOUNCER === undefined ? describe.skip : describe;

export interface PgBouncer {
  /** A URL of the test database's user, through PgBouncer, to the database it was started for. */
  readonly url: string;
  /** Its version, as `pgbouncer --version` prints it: "1.18.0". */
  readonly version: string;
  /** `transaction`, or `session` for a PgBouncer before 1.21 (see startPgBouncer). */
  readonly poolMode: 'transaction' | 'session';
  /** Stops it (its server connections close) and removes its files. */
  stop(): Promise<void>;
}

/**
 * Starts a PgBouncer of its own, as a child process, in front of `database` on the test server:
 * trust authentication for the test database's user, listening on a free loopback port. In
 * transaction mode with `max_prepared_statements` from 1.21 on, which the store's named statements
 * need in that mode; before 1.21 (Debian 12 has 1.18) in session mode, where they always work.
 */
export async function startPgBouncer(database: string): Promise<PgBouncer> {
  if (TEST_DATABASE_URL === undefined || PGBOUNCER === undefined) {
    throw new Error('startPgBouncer needs PLANT_STORE_TEST_DATABASE_URL and pgbouncer');
  }
  const program = PGBOUNCER;
  const version = /PgBouncer (\d+\.\d+\.\d+)/.exec(
    execFileSync(program, ['--version'], { encoding: 'utf8' }),
  )?.[1];
  if (version === undefined) throw new Error(`${program} --version named no version`);
  const [major = 0, minor = 0] = version.split('.').map(Number);
  const tracksPrepared = major > 1 || (major === 1 && minor >= 21);
  const poolMode = tracksPrepared ? 'transaction' : 'session';

  const server = new URL(TEST_DATABASE_URL);
  const user = decodeURIComponent(server.username) || os.userInfo().username;
  const password = decodeURIComponent(server.password);
  const port = await freePort();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'plant-store-pgbouncer-'));
  const ini = path.join(dir, 'pgbouncer.ini');
  const target = [
    `host=${server.hostname || '127.0.0.1'}`,
    `port=${testDatabasePort()}`,
    `dbname=${database}`,
    `user=${user}`,
    ...(password === '' ? [] : [`password=${password}`]),
  ].join(' ');
  fs.writeFileSync(path.join(dir, 'users.txt'), `"${user}" ""\n`);
  fs.writeFileSync(
    ini,
    [
      '[databases]',
      `plants = ${target}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${path.join(dir, 'users.txt')}`,
      `pool_mode = ${poolMode}`,
      ...(tracksPrepared ? ['max_prepared_statements = 100'] : []),
      '',
    ].join('\n'),
  );

  // PgBouncer refuses to run as root: it reads its files first, then becomes `nobody`.
  const asRoot = process.getuid?.() === 0;
  const child = spawn(program, [...(asRoot ? ['-u', 'nobody'] : []), ini], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let log = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (log += chunk));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
    fs.rmSync(dir, { recursive: true, force: true });
  };

  const deadline = Date.now() + 10_000;
  while (!/LOG process up/.test(log)) {
    if (child.exitCode !== null || child.signalCode !== null || Date.now() > deadline) {
      await stop();
      throw new Error(`pgbouncer did not start:\n${log}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const url = new URL(`postgres://127.0.0.1:${port}/plants`);
  url.username = server.username || user;
  return { url: url.toString(), version, poolMode, stop };
}
