import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import {
  answerHungDisk,
  cleanupChildren,
  hangingDiskEnv,
  PROJECT_ROOT,
  runTokenCli,
  startServer,
  tempSqlitePath,
} from '../support/server-process';
import { openSqlitePlantStore } from '../../src/store/sqlite/sqlite-plant-store';

const CREATED =
  /^Created token ([0-9a-f]{12}) \(([^\n]*)\)\. Its secret is shown this once; store it safely:\n(plnt_[A-Za-z0-9_-]{43})\n$/;
const ISO_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

interface ListedToken {
  id: string;
  name: string;
  createdAt: string;
  lastUsedAt?: string;
  revokedAt?: string;
}

async function cliCreate(
  sqlitePath: string,
  name: string,
): Promise<{ id: string; secret: string; stdout: string }> {
  const result = await runTokenCli(['create', '--name', name], { SQLITE_PATH: sqlitePath });
  expect(result).toMatchObject({ code: 0, stderr: '' });
  const match = CREATED.exec(result.stdout);
  if (match === null) throw new Error(`Unexpected output of create:\n${result.stdout}`);
  expect(match[2]).toBe(name);
  return { id: match[1]!, secret: match[3]!, stdout: result.stdout };
}

async function cliListJson(sqlitePath: string): Promise<{ tokens: ListedToken[]; stdout: string }> {
  const result = await runTokenCli(['list', '--json'], { SQLITE_PATH: sqlitePath });
  expect(result).toMatchObject({ code: 0, stderr: '' });
  return { tokens: JSON.parse(result.stdout) as ListedToken[], stdout: result.stdout };
}

async function postPlant(baseUrl: string, secret: string, id: number): Promise<Response> {
  return fetch(`${baseUrl}/plants`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${secret}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ id, name: 'Monstera deliciosa' }),
  });
}

afterEach(cleanupChildren);

describe('token create', () => {
  it('prints a plnt_ secret exactly once and exits 0', async () => {
    const sqlitePath = tempSqlitePath();

    const { secret, stdout } = await cliCreate(sqlitePath, 'ci deploy');

    expect(stdout.split(secret)).toHaveLength(2);
  });

  it('gives a different id and secret to each token', async () => {
    const sqlitePath = tempSqlitePath();

    const first = await cliCreate(sqlitePath, 'one');
    const second = await cliCreate(sqlitePath, 'two');

    expect(second.id).not.toBe(first.id);
    expect(second.secret).not.toBe(first.secret);
  });
});

describe('token list', () => {
  it('shows id, name and created time as JSON, never the secret', async () => {
    const sqlitePath = tempSqlitePath();
    const before = Date.now();
    const { id, secret } = await cliCreate(sqlitePath, 'ci');

    const { tokens, stdout } = await cliListJson(sqlitePath);

    expect(stdout).not.toContain(secret);
    expect(stdout).not.toContain(secret.slice('plnt_'.length));
    expect(tokens).toStrictEqual([{ id, name: 'ci', createdAt: expect.stringMatching(ISO_TIME) }]);
    const createdAt = Date.parse(tokens[0]!.createdAt);
    expect(createdAt).toBeGreaterThanOrEqual(before);
    expect(createdAt).toBeLessThanOrEqual(Date.now());
  });

  it('shows id, name and created time as a table, never the secret', async () => {
    const sqlitePath = tempSqlitePath();
    const { id, secret } = await cliCreate(sqlitePath, 'ci');
    const { tokens } = await cliListJson(sqlitePath);

    const result = await runTokenCli(['list'], { SQLITE_PATH: sqlitePath });

    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(result.stdout).not.toContain(secret);
    expect(result.stdout).not.toContain(secret.slice('plnt_'.length));
    const [header, row, ...rest] = result.stdout.trimEnd().split('\n');
    expect(rest).toStrictEqual([]);
    expect(header?.split(/\s{2,}/)).toStrictEqual([
      'ID',
      'NAME',
      'CREATED',
      'LAST USED',
      'REVOKED',
    ]);
    expect(row?.split(/\s{2,}/)).toStrictEqual([id, 'ci', tokens[0]!.createdAt, '-', '-']);
  });
});

describe('control characters in token names', () => {
  it('refuses a name that holds one with exit 2, and creates no store', async () => {
    const sqlitePath = tempSqlitePath();

    const result = await runTokenCli(['create', '--name', 'ci\u001b[2J'], {
      SQLITE_PATH: sqlitePath,
    });

    expect(result).toStrictEqual({
      code: 2,
      stdout: '',
      stderr: 'A token name must not hold control characters.\n',
    });
    expect(fs.existsSync(sqlitePath)).toBe(false);
  });

  it('refuses an empty name with exit 2 before it reaches a store, even one that cannot be reached', async () => {
    const result = await runTokenCli(['create', '--name', '  '], {
      SQLITE_PATH: undefined,
      DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none',
    });

    expect(result).toStrictEqual({
      code: 2,
      stdout: '',
      stderr: 'A token name must have 1 to 100 characters.\n',
    });
  });

  it('lists 150,000 tokens as a table', async () => {
    const sqlitePath = tempSqlitePath();
    const store = openSqlitePlantStore({
      path: sqlitePath,
      synchronous: 'NORMAL',
      busyTimeoutMs: 1000,
    });
    await store.close();
    const db = new Database(sqlitePath);
    const insert = db.prepare(
      'INSERT INTO tokens (id, name, hash, created_at) VALUES (?, ?, ?, ?)',
    );
    db.transaction(() => {
      for (let i = 0; i < 150_000; i++) {
        insert.run(i.toString(16).padStart(12, '0'), `t${i}`, i.toString(16).padStart(64, '0'), i);
      }
    })();
    db.close();

    const table = await runTokenCli(['list'], { SQLITE_PATH: sqlitePath });

    expect(table).toMatchObject({ code: 0, stderr: '' });
    const lines = table.stdout.trimEnd().split('\n');
    expect(lines).toHaveLength(150_001);
    expect(lines[150_000]?.split(/\s{2,}/).slice(0, 2)).toStrictEqual(['0000000249ef', 't149999']);
  });

  it('shows those of a name stored before they were refused as escapes, in the table and in --json, which parses to the exact name', async () => {
    const sqlitePath = tempSqlitePath();
    const name = 'ci\u001b[2J\u202e\u009b\u2028evil\\u001b';
    const store = openSqlitePlantStore({
      path: sqlitePath,
      synchronous: 'FULL',
      busyTimeoutMs: 1000,
    });
    await store.insertToken({
      id: 'aaaaaaaaaaaa',
      name,
      createdAt: new Date(),
      hash: 'f'.repeat(64),
    });
    await store.close();

    const table = await runTokenCli(['list'], { SQLITE_PATH: sqlitePath });

    expect(table).toMatchObject({ code: 0, stderr: '' });
    expect(table.stdout).not.toContain('\u001b');
    expect(table.stdout).not.toContain('\u202e');
    expect(table.stdout).not.toContain('\u2028');
    expect(
      table.stdout
        .split('\n')[1]
        ?.split(/\s{2,}/)
        .slice(0, 2),
    ).toStrictEqual(['aaaaaaaaaaaa', 'ci\\u001b[2J\\u202e\\u009b\\u2028evil\\\\u001b']);
    const json = await cliListJson(sqlitePath);
    expect(json.stdout).not.toMatch(/[\u007f-\u009f\u2028\u202e]/);
    expect(json.tokens.map((token) => token.name)).toStrictEqual([name]);
  });
});

describe('a token created with the CLI', () => {
  it('authenticates on a running server without a restart', async () => {
    const sqlitePath = tempSqlitePath();
    const server = await startServer({ sqlitePath });
    const { secret } = await cliCreate(sqlitePath, 'ci');

    const response = await postPlant(server.baseUrl, secret, 1);

    expect(response.status).toBe(200);
    expect(await response.json()).toStrictEqual({ name: 'Monstera deliciosa' });
  });

  it('gets a lastUsedAt in list --json once it was used, and not before', async () => {
    const sqlitePath = tempSqlitePath();
    const { id, secret } = await cliCreate(sqlitePath, 'ci');
    const server = await startServer({ sqlitePath });
    expect((await cliListJson(sqlitePath)).tokens[0]).not.toHaveProperty('lastUsedAt');

    const before = Date.now();
    expect((await postPlant(server.baseUrl, secret, 1)).status).toBe(200);
    const after = Date.now();

    const { tokens } = await cliListJson(sqlitePath);
    expect(tokens).toStrictEqual([
      {
        id,
        name: 'ci',
        createdAt: expect.stringMatching(ISO_TIME),
        lastUsedAt: expect.stringMatching(ISO_TIME),
      },
    ]);
    const lastUsedAt = Date.parse(tokens[0]!.lastUsedAt!);
    expect(lastUsedAt).toBeGreaterThanOrEqual(before);
    expect(lastUsedAt).toBeLessThanOrEqual(after);
  });
});

describe('token revoke', () => {
  it('makes the very next request with the token answer 401 invalid_token while the server keeps running', async () => {
    const sqlitePath = tempSqlitePath();
    const revoked = await cliCreate(sqlitePath, 'revoked');
    const kept = await cliCreate(sqlitePath, 'kept');
    const server = await startServer({ sqlitePath });
    expect((await postPlant(server.baseUrl, revoked.secret, 1)).status).toBe(200);

    const result = await runTokenCli(['revoke', revoked.id], { SQLITE_PATH: sqlitePath });
    const response = await postPlant(server.baseUrl, revoked.secret, 2);

    expect(result).toStrictEqual({ code: 0, stdout: `Revoked token ${revoked.id}.\n`, stderr: '' });
    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toBe(
      'Bearer realm="plants", error="invalid_token"',
    );
    expect(await response.json()).toStrictEqual({
      error: 401,
      message: 'A valid bearer token is required in the Authorization header.',
    });
    expect(server.process.exitCode).toBeNull();
    expect((await postPlant(server.baseUrl, kept.secret, 2)).status).toBe(200);
    const { tokens } = await cliListJson(sqlitePath);
    expect(tokens.find((token) => token.id === revoked.id)?.revokedAt).toMatch(ISO_TIME);
    expect(tokens.find((token) => token.id === kept.id)).not.toHaveProperty('revokedAt');
  });

  it('exits 1 and says so when no token has the id', async () => {
    const sqlitePath = tempSqlitePath();
    await cliCreate(sqlitePath, 'ci');

    const result = await runTokenCli(['revoke', 'ffffffffffff'], { SQLITE_PATH: sqlitePath });

    expect(result).toStrictEqual({
      code: 1,
      stdout: '',
      stderr: 'No active token has the id ffffffffffff.\n',
    });
  });

  it('exits 1 when the token is already revoked', async () => {
    const sqlitePath = tempSqlitePath();
    const { id } = await cliCreate(sqlitePath, 'ci');
    expect((await runTokenCli(['revoke', id], { SQLITE_PATH: sqlitePath })).code).toBe(0);

    const result = await runTokenCli(['revoke', id], { SQLITE_PATH: sqlitePath });

    expect(result).toStrictEqual({
      code: 1,
      stdout: '',
      stderr: `No active token has the id ${id}.\n`,
    });
  });
});

describe('a token store whose disk stops answering (SQLite FULL)', () => {
  it('says why the create failed, and ends though the sync is still stuck', async () => {
    const sqlitePath = tempSqlitePath();
    const flag = `${sqlitePath}.disk-flag`;
    const env = hangingDiskEnv(flag);
    fs.writeFileSync(flag, ''); // every fdatasync waits until answerHungDisk

    const result = await runTokenCli(['create', '--name', 'stuck'], {
      ...env,
      SQLITE_PATH: sqlitePath,
      SQLITE_SYNC_TIMEOUT_MS: '1000',
    });
    answerHungDisk(flag);

    expect(result).toMatchObject({ code: 'SIGKILL', stdout: '' });
    const lines = result.stderr.split('\n');
    expect(lines[0]).toBe(
      'The token store failed: The store is unavailable. (The sync of the WAL did not return ' +
        'within 1000 ms (SQLITE_SYNC_TIMEOUT_MS): the disk counts as failed.)',
    );
    const doubt =
      /^Token ([0-9a-f]{12}) may have been stored before the store failed, with its secret never shown: if npm run token -- list shows it, revoke it \(npm run token -- revoke \1\)\.$/.exec(
        lines[1] ?? '',
      );
    expect(doubt).not.toBeNull();
    expect(lines.slice(2)).toStrictEqual(['']);

    // It was: the commit came before the sync that timed out. The line's advice works.
    const id = doubt![1]!;
    const { tokens } = await cliListJson(sqlitePath);
    expect(tokens.map((token) => [token.id, token.name])).toStrictEqual([[id, 'stuck']]);
    const revoked = await runTokenCli(['revoke', id], { SQLITE_PATH: sqlitePath });
    expect(revoked).toStrictEqual({ code: 0, stdout: `Revoked token ${id}.\n`, stderr: '' });
  });
});

describe('a token store that cannot be reached', () => {
  it('exits 1 with one line that says so, not a stack', async () => {
    const result = await runTokenCli(['list'], {
      DATABASE_URL: 'postgres://postgres@127.0.0.1:1/test',
    });

    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(/^The token store failed: .*ECONNREFUSED.*\n$/);
  });

  it('says why when the host has two addresses, each refusing (an empty AggregateError)', async () => {
    const preload = path.join(PROJECT_ROOT, 'test', 'support', 'two-address-dns.js');
    const result = await runTokenCli(['list'], {
      DATABASE_URL: 'postgres://postgres@two-addresses.test:1/test',
      NODE_OPTIONS: `--require ${preload}`,
    });

    expect(result).toStrictEqual({
      code: 1,
      stdout: '',
      stderr:
        'The token store failed: connect ECONNREFUSED 127.0.0.1:1; connect ECONNREFUSED 127.0.0.2:1\n',
    });
  });
});

describe('a token store that does not exist', () => {
  /** A path under directories that do not exist, as a mistyped SQLITE_PATH gives. */
  function mistypedPath(): { sqlitePath: string; missingDir: string } {
    const missingDir = path.join(path.dirname(tempSqlitePath()), 'typo');
    return { sqlitePath: path.join(missingDir, 'dir', 'plants.sqlite'), missingDir };
  }

  it.each([[['list']], [['list', '--json']], [['revoke', 'aaaaaaaaaaaa']]])(
    'makes %j exit 1 and say so, creating neither the file nor its directories',
    async (args) => {
      const { sqlitePath, missingDir } = mistypedPath();

      const result = await runTokenCli(args, { SQLITE_PATH: sqlitePath });

      expect(result).toStrictEqual({
        code: 1,
        stdout: '',
        stderr: `No token store exists at ${sqlitePath} (SQLITE_PATH): check the path; the service's first start, or create, makes it.\n`,
      });
      expect(fs.existsSync(missingDir)).toBe(false);
    },
  );

  it('is made by create, directories included, so that a token can be made before the first start', async () => {
    const { sqlitePath } = mistypedPath();

    const { id } = await cliCreate(sqlitePath, 'ci');

    expect((await cliListJson(sqlitePath)).tokens.map((token) => token.id)).toStrictEqual([id]);
  });
});

describe('bad usage of the token CLI', () => {
  it.each([
    ['no command', []],
    ['create without --name', ['create']],
    ['an unknown command', ['rotate']],
    ['revoke without an id', ['revoke']],
    ['an unknown option', ['list', '--all']],
    ['--json with create', ['create', '--name', 'ci', '--json']],
    ['--json with revoke', ['revoke', 'aaaaaaaaaaaa', '--json']],
    ['a repeated --name', ['create', '--name=x', '--name=y']],
    ['a repeated --json', ['list', '--json', '--json']],
  ])('exits 2 with the usage text for %s, and opens no store', async (_label, args) => {
    const sqlitePath = tempSqlitePath();

    const result = await runTokenCli(args, { SQLITE_PATH: sqlitePath });

    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain('Usage:\n');
    expect(result.stderr).toContain('npm run token -- create --name NAME');
    expect(result.stderr).toContain('npm run token -- list [--json]');
    expect(result.stderr).toContain('npm run token -- revoke ID');
    expect(fs.existsSync(sqlitePath)).toBe(false);
  });

  it('says which option is repeated', async () => {
    const result = await runTokenCli(['create', '--name=x', '--name=y'], {
      SQLITE_PATH: tempSqlitePath(),
    });

    expect(result.stderr).toMatch(/^--name is given more than once\.\nUsage:\n/);
  });

  it.each([
    { args: ['--help'] },
    { args: ['-h'] },
    { args: ['-h', '-h'] },
    { args: ['create', '--name=x', '--name=y', '--help'] },
  ])('prints the usage text on stdout for $args and exits 0', async ({ args }) => {
    const result = await runTokenCli(args, { SQLITE_PATH: tempSqlitePath() });

    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(result.stdout).toMatch(/^Usage:\n/);
    expect(result.stdout).toContain('npm run token -- list [--json]');
  });
});
