import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import createClient from 'openapi-fetch';
import type { paths } from '../../generated/openapi';
import {
  cleanupChildren,
  createToken,
  developmentTokens,
  freePort,
  PROJECT_ROOT,
  runServerToExit,
  runTokenCli,
  startServer,
  tempSqlitePath,
  type RunningServer,
} from '../support/server-process';
import { seriesValue } from '../support/metrics-text';

/** A server on a fresh store with one CLI-made token, so that no development token is involved. */
async function startWithToken(): Promise<{
  server: RunningServer;
  token: string;
  sqlitePath: string;
}> {
  const sqlitePath = tempSqlitePath();
  const token = await createToken(sqlitePath, 'e2e');
  const server = await startServer({ sqlitePath });
  return { server, token, sqlitePath };
}

async function createPlantStatus(baseUrl: string, token: string, id: number): Promise<number> {
  const response = await fetch(`${baseUrl}/plants`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ id, name: 'Monstera deliciosa' }),
  });
  await response.arrayBuffer();
  return response.status;
}

afterEach(cleanupChildren);

describe('the plant API over loopback, through the typed client', () => {
  let server: RunningServer;
  let client: ReturnType<typeof createClient<paths>>;

  beforeEach(async () => {
    const started = await startWithToken();
    server = started.server;
    client = createClient<paths>({
      baseUrl: server.baseUrl,
      headers: { Authorization: `Bearer ${started.token}` },
    });
  });

  it('returns 200 with exactly the name and tag when a plant is created', async () => {
    const { data, error, response } = await client.POST('/plants', {
      body: { id: 42, name: 'Monstera deliciosa', tag: 'tropical' },
    });

    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(error).toBeUndefined();
    expect(data).toStrictEqual({ name: 'Monstera deliciosa', tag: 'tropical' });
  });

  it('returns 409 with the Error body when the id is taken', async () => {
    await client.POST('/plants', { body: { id: 42, name: 'Monstera deliciosa' } });

    const { data, error, response } = await client.POST('/plants', {
      body: { id: 42, name: 'Ficus lyrata' },
    });

    expect(response.status).toBe(409);
    expect(data).toBeUndefined();
    expect(error).toStrictEqual({ error: 409, message: 'A plant with the id 42 already exists.' });
  });

  it('returns 204 without a body when the plant exists, then 404 with the Error body', async () => {
    await client.POST('/plants', { body: { id: 7, name: 'Monstera deliciosa' } });

    const first = await client.DELETE('/plants/{id}', { params: { path: { id: 7 } } });
    const second = await client.DELETE('/plants/{id}', { params: { path: { id: 7 } } });

    expect(first.response.status).toBe(204);
    expect(first.error).toBeUndefined();
    expect(first.response.headers.get('content-length')).toBeNull();
    expect(second.response.status).toBe(404);
    expect(second.error).toStrictEqual({ error: 404, message: 'No plant has the id 7.' });
  });

  it('returns 401 with a bare Bearer challenge when no token is sent', async () => {
    const anonymous = createClient<paths>({ baseUrl: server.baseUrl });

    const { error, response } = await anonymous.POST('/plants', {
      body: { id: 1, name: 'Monstera deliciosa' },
    });

    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toBe('Bearer realm="plants"');
    expect(error).toStrictEqual({
      error: 401,
      message: 'A valid bearer token is required in the Authorization header.',
    });
  });
});

describe('GET /metrics of a running server', () => {
  it("reports the SQLite store's group commits, their writes, the time of their WAL syncs, and checkpoints not handed back", async () => {
    const { server, token } = await startWithToken();
    const statuses = await Promise.all(
      Array.from({ length: 20 }, (_, i) => createPlantStatus(server.baseUrl, token, i + 1)),
    );
    expect(statuses).toEqual(Array.from({ length: 20 }, () => 200));

    const text = await (await fetch(`${server.baseUrl}/metrics`)).text();
    const commits = seriesValue(text, 'sqlite_group_commits_total');
    const writes = seriesValue(text, 'sqlite_group_commit_writes_total');
    // The 20 creates, and the token's last use where it was due (a write of its own).
    expect(writes).toBeGreaterThanOrEqual(20);
    expect(commits).toBeGreaterThanOrEqual(1);
    expect(commits).toBeLessThanOrEqual(writes);
    // FULL, the default, syncs the WAL after each of them.
    expect(seriesValue(text, 'sqlite_wal_sync_seconds_total')).toBeGreaterThan(0);
    // The checkpoints are the store's own (the thread's, once due), not handed back to SQLite.
    expect(seriesValue(text, 'sqlite_wal_checkpoints_handed_back')).toBe(0);
  });
});

describe('the development token', () => {
  it('is printed once on the first start with an empty store outside production, and it works', async () => {
    const server = await startServer({ sqlitePath: tempSqlitePath() });

    const tokens = developmentTokens(server.output());
    expect(tokens).toHaveLength(1);
    expect(tokens[0]).toMatch(/^plnt_[A-Za-z0-9_-]{43}$/);
    expect(await createPlantStatus(server.baseUrl, tokens[0]!, 1)).toBe(200);
  });

  it('is printed with a curl example that points at the port the server listens on', async () => {
    const server = await startServer({ sqlitePath: tempSqlitePath() });

    expect(server.output()).toContain(`curl -i -X POST ${server.baseUrl}/plants `);
  });

  it('is not printed again on a second start on the same file, and the first one still works', async () => {
    const sqlitePath = tempSqlitePath();
    const first = await startServer({ sqlitePath });
    const [token] = developmentTokens(first.output());
    expect(await createPlantStatus(first.baseUrl, token!, 1)).toBe(200);
    expect(await first.stop()).toBe(0);

    const second = await startServer({ sqlitePath });

    expect(developmentTokens(second.output())).toStrictEqual([]);
    expect(second.output()).not.toContain('development token');
    expect(await createPlantStatus(second.baseUrl, token!, 2)).toBe(200);
  });
});

describe('a first start that cannot bind its port', () => {
  it.each(['1', '2'])(
    'with WORKERS=%s exits 1 without creating the development token, which the next start prints',
    async (workers) => {
      const sqlitePath = tempSqlitePath();
      const taken = net.createServer();
      await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
      const { port } = taken.address() as net.AddressInfo;
      let failed;
      try {
        failed = await runServerToExit({
          sqlitePath,
          env: { PORT: String(port), WORKERS: workers },
        });
      } finally {
        taken.close();
      }

      expect(failed.code).toBe(1);
      // `listen EADDRINUSE`, or `bind EADDRINUSE` in a worker
      expect(failed.stderr).toMatch(
        /^The plant store failed to start: (listen|bind) EADDRINUSE\b/m,
      );
      expect(failed.stdout).not.toContain('development token');
      const list = await runTokenCli(['list', '--json'], { SQLITE_PATH: sqlitePath });
      expect(JSON.parse(list.stdout)).toStrictEqual([]);
      const next = await startServer({ sqlitePath });
      const [token] = developmentTokens(next.output());
      expect(await createPlantStatus(next.baseUrl, token!, 1)).toBe(200);
    },
  );
});

describe('a production start', () => {
  // A value other than development or test fails closed, as production does.
  it.each(['production', 'prod'])(
    'with NODE_ENV=%s exits non-zero without listening and says how to create a token when the store has none',
    async (nodeEnv) => {
      const sqlitePath = tempSqlitePath();

      const result = await runServerToExit({
        sqlitePath,
        env: { NODE_ENV: nodeEnv },
        timeoutMs: 5_000,
      });

      expect(result.code).toBe(1);
      expect(result.durationMs).toBeLessThan(5_000);
      const output = result.stdout + result.stderr;
      expect(output).toContain('npm run token -- create');
      expect(output).not.toContain('"listening"');
      expect(output).not.toContain('development token');
      const list = await runTokenCli(['list', '--json'], { SQLITE_PATH: sqlitePath });
      expect(JSON.parse(list.stdout)).toStrictEqual([]);
    },
  );

  it('with LOG_LEVEL=silent still says on stderr why it exits 1 when the store has no token', async () => {
    const result = await runServerToExit({
      sqlitePath: tempSqlitePath(),
      env: { NODE_ENV: 'production', LOG_LEVEL: 'silent' },
    });

    expect(result).toMatchObject({
      code: 1,
      stdout: '',
      stderr:
        'The plant store failed to start: No API token exists, so no request could be served. Create one with `npm run token -- create --name NAME` and start again.\n',
    });
  });

  it('listens and accepts a token created with the CLI beforehand', async () => {
    const sqlitePath = tempSqlitePath();
    const token = await createToken(sqlitePath, 'production');

    const server = await startServer({ sqlitePath, env: { NODE_ENV: 'production' } });

    expect(server.output()).not.toContain('development token');
    expect(await createPlantStatus(server.baseUrl, token, 3)).toBe(200);
  });
});

describe('a PostgreSQL host of two addresses, each refusing', () => {
  it('exits 1 at once and says why (the connection failed with an empty AggregateError)', async () => {
    const preload = path.join(PROJECT_ROOT, 'test', 'support', 'two-address-dns.js');
    const result = await runServerToExit({
      sqlitePath: tempSqlitePath(),
      env: {
        DATABASE_URL: 'postgres://postgres@two-addresses.test:1/test',
        NODE_OPTIONS: `--require ${preload}`,
      },
      timeoutMs: 10_000,
    });

    expect(result.code).toBe(1);
    expect(result.stderr).toContain(
      'The plant store failed to start: connect ECONNREFUSED 127.0.0.1:1; connect ECONNREFUSED 127.0.0.2:1\n',
    );
  });
});

describe('a SQLite path whose directory cannot be made', () => {
  // mkdir under /proc answers ENOENT although /proc exists: node's recursive mkdirSync looped there.
  const sqlitePath = '/proc/plant-store-nowhere/plants.sqlite';

  it('exits 1 at once and says why, without listening', async () => {
    const result = await runServerToExit({ sqlitePath, timeoutMs: 10_000 });

    expect(result.code).toBe(1);
    expect(result.durationMs).toBeLessThan(10_000);
    expect(result.stdout + result.stderr).not.toContain('"listening"');
    expect(result.stderr).toContain(
      "The plant store failed to start: ENOENT: no such file or directory, mkdir '/proc/plant-store-nowhere'",
    );
  });

  it('makes the token CLI exit 1 with one line that says why', async () => {
    const result = await runTokenCli(['create', '--name', 'ci'], { SQLITE_PATH: sqlitePath });

    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toBe(
      "The token store failed: ENOENT: no such file or directory, mkdir '/proc/plant-store-nowhere'\n",
    );
  });
});

describe('an invalid configuration', () => {
  it('exits non-zero without listening and lists every invalid variable on stderr', async () => {
    const result = await runServerToExit({
      sqlitePath: tempSqlitePath(),
      env: { PORT: 'abc', SQLITE_SYNCHRONOUS: 'OFF' },
    });

    expect(result.code).toBe(1);
    expect(result.stdout).not.toContain('"listening"');
    const lines = result.stderr.split('\n');
    expect(lines.filter((line) => line.includes('PORT') && line.includes('"abc"'))).toHaveLength(1);
    expect(
      lines.filter((line) => line.includes('SQLITE_SYNCHRONOUS') && line.includes('"OFF"')),
    ).toHaveLength(1);
  });
});

describe('a standard output whose writes fail (a full disk under a redirected log)', () => {
  it('serves on, says so once on stderr, and exits 0 on SIGTERM', async () => {
    // /dev/full answers every write with ENOSPC, as a full file system does.
    const full = fs.openSync('/dev/full', 'w');
    try {
      const sqlitePath = tempSqlitePath();
      const token = await createToken(sqlitePath, 'e2e');
      const port = String(await freePort());
      const server = await startServer({ sqlitePath, env: { PORT: port }, stdoutFd: full });

      // About 300 bytes of log a request: 2,000 of them fill many of the log's 8 KiB batches.
      const statuses = new Set<number>();
      for (let id = 1; id <= 2000; id += 50) {
        const batch = Array.from({ length: 50 }, (_, i) =>
          createPlantStatus(server.baseUrl, token, id + i),
        );
        for (const status of await Promise.all(batch)) statuses.add(status);
      }

      expect([...statuses]).toEqual([200]);
      expect(server.process.exitCode).toBeNull();
      const reports = server.stderr().match(/^Writing the log to standard output failed.*$/gm);
      expect(reports).toEqual([
        'Writing the log to standard output failed (ENOSPC): its lines wait, and are dropped ' +
          'past 16 MiB, until a write succeeds.',
      ]);
      expect(await server.stop('SIGTERM')).toBe(0);
    } finally {
      fs.closeSync(full);
    }
  });
});

describe('stopping with a signal', () => {
  it.each(['SIGTERM', 'SIGINT'] as const)(
    'exits with code 0 on %s after serving requests',
    async (signal) => {
      const { server, token } = await startWithToken();
      expect(await createPlantStatus(server.baseUrl, token, 4)).toBe(200);

      const code = await server.stop(signal);

      expect(code).toBe(0);
      expect(server.process.signalCode).toBeNull();
      expect(server.output()).toContain(
        `"signal":"${signal}","message":"stopping: draining in-flight requests"`,
      );
      expect(server.output()).toContain('"message":"stopped"');
    },
  );

  // `npm start | head`, or a log shipper that died: log lines held back meet a pipe nobody reads.
  it('exits with code 0 on SIGTERM at once when nobody reads its standard output any more', async () => {
    const server = await startServer({ sqlitePath: tempSqlitePath() });
    // The stop's own lines are then still held back when the exit writes them. (Lines held back
    // longer meet the closed pipe in the periodic flush, after which pino drops every line.)
    server.process.stdout?.destroy();

    const started = Date.now();
    const code = await server.stop('SIGTERM');

    expect(code).toBe(0);
    // Not after the exit's 5 s wait for a standard output that does not drain.
    expect(Date.now() - started).toBeLessThan(4_000);
  });

  // A log shipper that hangs, then dies: while its pipe is full a write to it cannot be cut short,
  // but once it is gone the process must end, not retry the write for ever.
  it('exits with code 0 on SIGTERM once a reader that stopped reading its standard output is gone', async () => {
    const { server, token } = await startWithToken();
    server.process.stdout?.pause();
    // Request lines of about 300 bytes each: several times what the pipe and the reader hold.
    for (let batch = 0; batch < 300; batch++) {
      const statuses = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          createPlantStatus(server.baseUrl, token, batch * 10 + i + 1),
        ),
      );
      expect(statuses.every((status) => status === 200)).toBe(true);
    }

    const stopped = server.stop('SIGTERM');
    // Past the exit's 5 s wait for held-back lines.
    await new Promise((resolve) => setTimeout(resolve, 6_000));
    const gone = Date.now();
    server.process.stdout?.destroy();

    expect(await stopped).toBe(0);
    expect(Date.now() - gone).toBeLessThan(3_000);
  }, 60_000);

  it('drops log lines past 16 MiB waiting for a standard output nobody reads, and counts them', async () => {
    const { server } = await startWithToken();
    server.process.stdout?.pause();
    const { hostname, port } = new URL(server.baseUrl);
    // 404s to a path of 12,000 backslashes: a request line of about 24 KB each (escaped), 1,000 of
    // them 24 MB, over the 16 MiB the process holds.
    const request = `GET /${'\\'.repeat(12_000)} HTTP/1.1\r\nHost: x\r\n\r\n`;
    for (let connection = 0; connection < 10; connection++) {
      const answers = await new Promise<string>((resolve, reject) => {
        const socket = net.connect(Number(port), hostname);
        let text = '';
        socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')));
        socket.on('close', () => resolve(text));
        socket.on('error', reject);
        socket.write(
          request.repeat(99) + request.replace('\r\n\r\n', '\r\nConnection: close\r\n\r\n'),
        );
      });
      expect(answers.match(/HTTP\/1\.1 404 /g)).toHaveLength(100);
    }

    const metrics = await (await fetch(`${server.baseUrl}/metrics`)).text();
    const dropped = Number(/^log_lines_dropped_total (\d+)$/m.exec(metrics)?.[1]);
    expect(dropped).toBeGreaterThan(0);
    expect(dropped).toBeLessThan(1_000);
    expect((await fetch(`${server.baseUrl}/healthz`)).status).toBe(200);
  }, 60_000);

  // The stop handlers must be installed before "listening" is logged: ten tries catch a race.
  it('exits with code 0 on SIGTERM sent as soon as "listening" is logged', async () => {
    for (let attempt = 0; attempt < 10; attempt++) {
      const server = await startServer({ sqlitePath: tempSqlitePath() });
      const code = await server.stop('SIGTERM');
      expect({ attempt, code, signal: server.process.signalCode }).toStrictEqual({
        attempt,
        code: 0,
        signal: null,
      });
    }
  });
});
