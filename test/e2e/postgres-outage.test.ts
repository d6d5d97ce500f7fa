import { isDeepStrictEqual } from 'node:util';
import {
  createTestSchema,
  describeWithPostgres,
  testDatabasePort,
  type TestSchema,
} from '../support/postgres';
import {
  callApi,
  cleanupChildren,
  startServer,
  startWithToken,
  tempSqlitePath,
  type RunningServer,
} from '../support/server-process';
import { logLinesOf, requestLineOf, waitFor } from '../support/log-lines';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy';

/** What a client waits at most; every answer during an outage must come well before it. */
const CLIENT_TIMEOUT_MS = 10_000;
const CONNECT_TIMEOUT_MS = 1000;

let schema: TestSchema;
let proxy: TcpProxy;
let server: RunningServer;
let token: string;

beforeEach(async () => {
  schema = await createTestSchema();
  proxy = await startTcpProxy(testDatabasePort());
  const url = new URL(schema.url);
  url.host = `127.0.0.1:${proxy.port}`;
  ({ server, token } = await startWithToken({
    env: { DATABASE_URL: url.toString(), PG_CONNECT_TIMEOUT_MS: String(CONNECT_TIMEOUT_MS) },
  }));
});
afterEach(async () => {
  await cleanupChildren();
  await proxy?.close();
  await schema?.drop();
});

async function timed(method: string, path: string, body?: string) {
  const started = performance.now();
  const res = await callApi(server, token, method, path, body);
  return { res, body: await res.text(), ms: performance.now() - started };
}

async function expectUnavailable(method: string, path: string, body?: string): Promise<number> {
  const { res, body: text, ms } = await timed(method, path, body);
  expect(res.status).toBe(503);
  expect(res.headers.get('retry-after')).toBe('1');
  expect(JSON.parse(text)).toEqual({ error: 503, message: expect.any(String) });
  return ms;
}

/** Polls until the instance answers 200 on /readyz; the service must recover without a restart. */
async function waitUntilReady(): Promise<number> {
  const started = performance.now();
  while (performance.now() - started < CLIENT_TIMEOUT_MS) {
    if ((await timed('GET', '/readyz')).res.status === 200) return performance.now() - started;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error('the service did not become ready again');
}

describeWithPostgres('PostgreSQL outages', () => {
  it('answers 503 fast while the database refuses connections, and recovers by itself', async () => {
    expect((await timed('POST', '/plants', '{"id": 1, "name": "before"}')).res.status).toBe(200);
    expect((await timed('GET', '/readyz')).res.status).toBe(200);

    await proxy.cut();
    const times = [
      await expectUnavailable('POST', '/plants', '{"id": 2, "name": "during"}'),
      await expectUnavailable('DELETE', '/plants/1'),
      await expectUnavailable('GET', '/readyz'),
    ];
    expect((await timed('GET', '/healthz')).res.status).toBe(200);
    // Each 503 of an operation is logged as a warning, its request named as in the request line.
    const warnings = () =>
      logLinesOf(server).filter((line) => line['message'] === 'store unavailable');
    const named = (method: string, path: string) => () =>
      warnings().some((line) => isDeepStrictEqual(line['req'], { method, path }));
    await waitFor('the POST warning', named('POST', '/plants'));
    await waitFor('the DELETE warning', named('DELETE', '/plants/1'));
    expect(warnings().filter((line) => 'path' in line || 'method' in line)).toStrictEqual([]);
    // The pool's idle connections, cut with the rest, are each logged as lost, not dropped unseen.
    await waitFor('a lost idle connection logged', () =>
      logLinesOf(server).some(
        (line) =>
          line['message'] === 'database connection lost while idle' &&
          line.level === 40 &&
          typeof (line['err'] as { message?: unknown } | undefined)?.message === 'string',
      ),
    );
    console.log(
      `refused connections: time to 503 ${times.map((ms) => ms.toFixed(0)).join(', ')} ms`,
    );

    await proxy.restore();
    const recoveredMs = await waitUntilReady();
    console.log(
      `refused connections: ready again ${recoveredMs.toFixed(0)} ms after the database came back`,
    );
    expect((await timed('DELETE', '/plants/1')).res.status).toBe(204);
    expect((await timed('DELETE', '/plants/2')).res.status).toBe(404);
    expect(server.process.exitCode).toBeNull();
  });

  it('logs a request whose client gave up while the database did not answer: 499, aborted', async () => {
    proxy.blackhole();
    const giveUp = new AbortController();
    const call = fetch(`${server.baseUrl}/readyz`, {
      headers: { 'X-Request-Id': 'gave-up' },
      signal: giveUp.signal,
    });
    setTimeout(() => giveUp.abort(), 300);
    await expect(call).rejects.toThrow();

    expect(await requestLineOf(server, 'gave-up')).toMatchObject({
      operationId: 'getReadiness',
      req: { method: 'GET', path: '/readyz' },
      res: { status: 499 },
      aborted: true,
    });
    await proxy.restore();
    await waitUntilReady();
    // The 503 the handler wrote later, into the closed connection, made no second request line.
    const lines = logLinesOf(server).filter((line) => line['reqId'] === 'gave-up');
    expect(lines.filter((line) => line['message'] === 'request')).toHaveLength(1);
  });

  it('answers 503 within the connect time-out while the database host does not answer at all', async () => {
    expect((await timed('POST', '/plants', '{"id": 1, "name": "before"}')).res.status).toBe(200);

    proxy.blackhole();
    const times = [
      await expectUnavailable('POST', '/plants', '{"id": 2, "name": "during"}'),
      await expectUnavailable('GET', '/readyz'),
    ];
    for (const ms of times) expect(ms).toBeLessThan(CLIENT_TIMEOUT_MS / 2);
    console.log(
      `silent host: time to 503 ${times.map((ms) => ms.toFixed(0)).join(', ')} ms (connect time-out ${CONNECT_TIMEOUT_MS} ms)`,
    );

    await proxy.restore();
    await waitUntilReady();
    expect((await timed('DELETE', '/plants/1')).res.status).toBe(204);
    expect(server.process.exitCode).toBeNull();
  });

  it('with WORKERS=2, keeps serving while a replacement worker cannot reach the database, and starts it again later', async () => {
    const url = new URL(schema.url);
    url.host = `127.0.0.1:${proxy.port}`;
    // The same schema as the first server's, so its token serves here too.
    const clustered = await startServer({
      sqlitePath: tempSqlitePath(),
      env: {
        DATABASE_URL: url.toString(),
        PG_CONNECT_TIMEOUT_MS: String(CONNECT_TIMEOUT_MS),
        WORKERS: '2',
      },
    });
    const messages = () => logLinesOf(clustered).map((line) => String(line['message']));
    const workerPids = () =>
      logLinesOf(clustered)
        .filter((line) => line['message'] === 'worker listening')
        .map((line) => Number(line['pid']));
    const until = (what: string, done: () => boolean) => waitFor(what, done, CLIENT_TIMEOUT_MS);
    await until('two workers listening', () => workerPids().length === 2);
    const post = (id: number) =>
      callApi(clustered, token, 'POST', '/plants', `{"id": ${id}, "name": "p"}`);

    await proxy.cut();
    process.kill(workerPids()[0]!, 'SIGKILL');
    await until('a replacement that failed at start', () =>
      messages().some((message) => message.startsWith('a new worker exited before it listened')),
    );
    // The primary and the other worker go on: 503 while the database is away.
    expect((await post(1)).status).toBe(503);
    expect(clustered.process.exitCode).toBeNull();

    await proxy.restore();
    await until('a replacement listening', () => workerPids().length === 3);
    expect((await post(2)).status).toBe(200);
    expect(clustered.process.exitCode).toBeNull();
    expect(messages().some((message) => message.includes('stopping'))).toBe(false);
  });
});
