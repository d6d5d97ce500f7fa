import { EventEmitter, once } from 'node:events';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import express from 'express';
import request from 'supertest';
import { parseConfig } from '../../src/config';
import type { RateLimits } from '../../src/http/protections';
import { createRequestLog, flushRequestLines } from '../../src/http/request-log';
import { createLogger } from '../../src/logger';
import { createMetrics } from '../../src/metrics';
import { createHttpServer } from '../../src/server';
import { connect, type Target } from '../reliability/support/http';
import { responsesIn } from '../reliability/support/raw';
import { capturingLogger, waitFor } from '../support/log-lines';
import {
  buildTestApp,
  expectError,
  TEST_STORE,
  type LogLine,
  type TestApp,
} from '../support/test-app';

let t: TestApp;
afterEach(async () => {
  expect(t.errors).toEqual([]);
  await t.close();
});

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

function create(id: number, token = t.token) {
  return request(t.app)
    .post('/plants')
    .set('Authorization', `Bearer ${token}`)
    .set('Content-Type', 'application/json')
    .send(JSON.stringify({ id, name: 'Secret Fern', tag: 'private-tag' }));
}

describe('request ids', () => {
  beforeEach(async () => {
    t = await buildTestApp();
  });

  it('generates a UUID when the request has none, on success and on errors', async () => {
    for (const res of [
      await create(1),
      await request(t.app).get('/nowhere'),
      await request(t.app).delete('/plants/1'),
    ]) {
      expect(res.headers['x-request-id']).toMatch(UUID);
    }
  });

  it('echoes a well-formed incoming X-Request-Id, also on a 400', async () => {
    const res = await request(t.app)
      .post('/plants')
      .set('Authorization', `Bearer ${t.token}`)
      .set('X-Request-Id', 'client-42:retry.1_a')
      .set('Content-Type', 'application/json')
      .send('{');
    expectError(res, 400);
    expect(res.headers['x-request-id']).toBe('client-42:retry.1_a');
  });

  it.each(['x'.repeat(129), 'has space', 'semi;colon', 'ünicode', ''])(
    'replaces the malformed incoming id %j with a new UUID',
    async (id) => {
      const res = await request(t.app).get('/healthz').set('X-Request-Id', id);
      expect(res.headers['x-request-id']).toMatch(UUID);
    },
  );
});

describe('request logs', () => {
  beforeEach(async () => {
    t = await buildTestApp();
  });

  it('writes one line per request with its id, operationId, status and latency', async () => {
    await create(1).set('X-Request-Id', 'trace-1');
    await request(t.app).delete('/plants/2').set('Authorization', `Bearer ${t.token}`);
    const lines = t.logs.filter((line) => line.message === 'request');
    expect(lines).toEqual([
      expect.objectContaining({
        reqId: 'trace-1',
        operationId: 'createPlant',
        req: { method: 'POST', path: '/plants' },
        res: { status: 200 },
        latencyMs: expect.any(Number),
      }),
      expect.objectContaining({ operationId: 'deletePlant', res: { status: 404 } }),
    ]);
  });

  it('writes each request line exactly as pino would, whatever the path holds', async () => {
    const raw: string[] = [];
    const logger = createLogger({
      level: 'info',
      destination: { write: (line) => raw.push(line) },
    });
    const app = express();
    app.use(createRequestLog(logger));
    app.use((_req, res) => void res.status(404).end());
    // Raw, so the target keeps characters a client library would percent-encode.
    const server = app.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const socket = net.connect((server.address() as AddressInfo).port, '127.0.0.1').resume();
    socket.end(
      'GET /odd/"quoted"/\\back?q=1 HTTP/1.1\r\nHost: x\r\nX-Request-Id: trace-2\r\nConnection: close\r\n\r\n',
    );
    await once(socket, 'close');
    server.close();
    flushRequestLines();
    expect(raw).toHaveLength(1);
    const line = raw.pop()!;
    const written = JSON.parse(line) as { time: string; latencyMs: number };
    // pino's own serialisation of the same fields, at the same time and latency.
    jest.useFakeTimers({ now: new Date(written.time), doNotFake: ['nextTick', 'setImmediate'] });
    try {
      logger.info(
        {
          reqId: 'trace-2',
          operationId: undefined,
          req: { method: 'GET', path: '/odd/"quoted"/\\back' },
          res: { status: 404 },
          latencyMs: written.latencyMs,
        },
        'request',
      );
    } finally {
      jest.useRealTimers();
    }
    expect(raw).toEqual([line]);
  });

  it('writes the lines of one turn of the event loop together, or at once when flushed', async () => {
    const writes: string[] = [];
    const log = createRequestLog(
      createLogger({ level: 'info', destination: { write: (chunk) => writes.push(chunk) } }),
    );
    /** Runs the middleware for a request that then finishes, as Node's response would say. */
    const finishOne = (n: number) => {
      const res = Object.assign(new EventEmitter(), {
        statusCode: 204,
        headersSent: true,
        writableFinished: true,
        locals: {} as Record<string, unknown>,
        setHeader: () => undefined,
      });
      log(
        { method: 'DELETE', url: `/plants/${n}`, headers: {} } as never,
        res as never,
        () => undefined,
      );
      res.emit('finish');
      res.emit('close');
    };
    finishOne(1);
    finishOne(2);
    finishOne(3);
    expect(writes).toEqual([]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(writes).toHaveLength(1);
    expect(
      writes[0]!
        .trimEnd()
        .split('\n')
        .map((line) => JSON.parse(line).req.path),
    ).toEqual(['/plants/1', '/plants/2', '/plants/3']);
    finishOne(4);
    flushRequestLines();
    expect(writes).toHaveLength(2);
    expect(writes[1]).toContain('"path":"/plants/4"');
  });

  it('never logs a token, the Authorization header, the query string or a body', async () => {
    await create(1);
    await request(t.app)
      .delete('/plants/1?access_token=plnt_query_secret')
      .set('Authorization', 'Bearer plnt_wrong_secret');
    await request(t.app)
      .post('/plants')
      .set('Authorization', `Bearer ${t.token}`)
      .send({ id: 3, name: 'Secret Fern' });
    const text = JSON.stringify(t.logs);
    expect(t.logs.length).toBeGreaterThanOrEqual(3);
    for (const secret of [
      t.token,
      'plnt_wrong_secret',
      'plnt_query_secret',
      'Secret Fern',
      'private-tag',
      'Bearer',
    ]) {
      expect(text).not.toContain(secret);
    }
  });
});

/** A readiness probe whose store check waits until released: a request held in the app. */
function heldReadiness() {
  let checks = 0;
  const held: (() => void)[] = [];
  return {
    readiness: {
      checkStore: async () => {
        checks += 1;
        await new Promise<void>((resolve) => held.push(resolve));
      },
      isShuttingDown: () => false,
    },
    /** How many store checks have begun (probes in flight together share one). */
    checks: () => checks,
    release: () => held.splice(0).forEach((resolve) => resolve()),
  };
}

/** An HTTP server listening on a free port, with the responses it has handed to its listeners. */
interface Served {
  readonly target: Target;
  readonly responses: http.ServerResponse[];
  /** The lines the server logged itself, apart from the app's (`t.logs`). */
  readonly serverLines: LogLine[];
  close(): Promise<void>;
}

/**
 * `app` served on a free port by the service's own server (main.ts's createHttpServer), or by
 * node:http alone (as Express's app.listen and supertest serve it).
 */
async function serve(app: TestApp['app'], by: 'createHttpServer' | 'node:http'): Promise<Served> {
  const serverLines: LogLine[] = [];
  const logger = capturingLogger<LogLine>((entry) => serverLines.push(entry));
  const server =
    by === 'createHttpServer'
      ? createHttpServer(app, parseConfig({}).http, logger)
      : http.createServer(app);
  const responses: http.ServerResponse[] = [];
  server.on('request', (_req, res: http.ServerResponse) => responses.push(res));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    target: { host: '127.0.0.1', port: (server.address() as AddressInfo).port },
    responses,
    serverLines,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** The request lines the app logged for `reqId`. */
function requestLinesOf(reqId: string): LogLine[] {
  return t.logs.filter((line) => line.message === 'request' && line['reqId'] === reqId);
}

const get = (path: string, reqId: string) =>
  `GET ${path} HTTP/1.1\r\nHost: x\r\nX-Request-Id: ${reqId}\r\n\r\n`;

describe('the request line of a request whose connection ended before its answer was written whole', () => {
  let probe: ReturnType<typeof heldReadiness>;
  let served: Served | undefined;
  beforeEach(() => {
    probe = heldReadiness();
  });
  afterEach(async () => {
    probe.release();
    await served?.close();
    served = undefined;
  });

  it('is 499 and aborted when the client closed the connection before any answer began', async () => {
    t = await buildTestApp({ readiness: probe.readiness });
    served = await serve(t.app, 'createHttpServer');
    const client = await connect(served.target);
    client.write(get('/readyz', 'gone-early'));
    await waitFor('the probe at the store check', () => probe.checks() === 1);

    client.destroy();

    await waitFor('its request line', () => requestLinesOf('gone-early').length > 0);
    expect(requestLinesOf('gone-early')).toEqual([
      expect.objectContaining({
        operationId: 'getReadiness',
        req: { method: 'GET', path: '/readyz' },
        res: { status: 499 },
        aborted: true,
      }),
    ]);
  });

  it('is not written for a request the server answered itself, which wrote its own line', async () => {
    t = await buildTestApp();
    served = await serve(t.app, 'createHttpServer');
    const client = await connect(served.target);
    const received: Buffer[] = [];
    client.on('data', (chunk: Buffer) => received.push(chunk));
    // Its headers reach the app; its chunked body breaks off, and node:http cannot read on.
    client.write(
      `POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${t.token}\r\n` +
        'Content-Type: application/json\r\nX-Request-Id: broken-body\r\n' +
        'Transfer-Encoding: chunked\r\n\r\nzz\r\n',
    );
    await once(client, 'close');
    // The request log listened to the response first: once it has closed, the log has had its say.
    const [response] = served.responses;
    if (response?.closed === false) await once(response, 'close');

    expect(responsesIn(Buffer.concat(received)).map((answer) => answer.status)).toEqual([400]);
    expect(served.serverLines).toEqual([
      expect.objectContaining({
        reqId: 'broken-body',
        req: { method: 'POST', path: '/plants' },
        res: { status: 400 },
        cause: 'HPE_INVALID_CHUNK_SIZE',
      }),
    ]);
    expect(requestLinesOf('broken-body')).toEqual([]);
  });

  // createHttpServer starts a pipelined request only once the answer before it is written
  // (runInTurn), and its response then has the connection. node:http alone runs them side by side:
  // the response to the second waits for the connection, which it never gets here.
  describe('of requests pipelined on a connection that node:http alone serves', () => {
    beforeEach(async () => {
      t = await buildTestApp({ readiness: probe.readiness });
      served = await serve(t.app, 'node:http');
    });

    it('keeps the status of an answer the app gave while it waited for the connection, and is aborted', async () => {
      const { target, responses } = served!;
      const client = await connect(target);
      client.write(get('/readyz', 'held') + get('/healthz', 'answered-behind'));
      await waitFor(
        'the probe held, and the health check answered behind it',
        () => probe.checks() === 1 && responses[1]?.writableEnded === true,
      );

      client.destroy();

      await waitFor('its request line', () => requestLinesOf('answered-behind').length > 0);
      expect(requestLinesOf('answered-behind')).toEqual([
        expect.objectContaining({
          operationId: 'getHealth',
          req: { method: 'GET', path: '/healthz' },
          res: { status: 200 },
          aborted: true,
        }),
      ]);
    });

    it('is written for a request queued behind another, 499 when no answer had begun', async () => {
      const { target, responses } = served!;
      const client = await connect(target);
      client.write(get('/readyz', 'first') + get('/readyz', 'queued'));
      await waitFor(
        'both probes in the app, the first at the store check',
        () => responses.length === 2 && probe.checks() === 1,
      );

      client.destroy();

      for (const reqId of ['first', 'queued']) {
        await waitFor(`the request line of ${reqId}`, () => requestLinesOf(reqId).length > 0);
        expect(requestLinesOf(reqId)).toEqual([
          expect.objectContaining({
            req: { method: 'GET', path: '/readyz' },
            res: { status: 499 },
            aborted: true,
          }),
        ]);
      }
      // Answered once the check is released, to a connection that is gone: no second line.
      probe.release();
      await waitFor('both answers given', () => responses.every((res) => res.writableEnded));
      expect([...requestLinesOf('first'), ...requestLinesOf('queued')]).toHaveLength(2);
    });
  });
});

describe('GET /metrics', () => {
  it('counts requests by operation and status, times the store, and exports process metrics', async () => {
    const metrics = createMetrics();
    t = await buildTestApp({ metrics });
    await create(1);
    await create(1);
    const res = await request(t.app).get('/metrics');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain/);
    expect(res.text).toContain(
      'http_requests_total{operation="createPlant",method="POST",status="200"} 1',
    );
    expect(res.text).toContain(
      'http_requests_total{operation="createPlant",method="POST",status="409"} 1',
    );
    expect(res.text).toMatch(
      /http_request_duration_seconds_bucket\{le="0\.005",operation="createPlant"/,
    );
    expect(res.text).toContain('process_cpu_user_seconds_total');
    expect(res.text).toContain('nodejs_eventloop_lag_seconds');
  });

  it('times store calls by method and outcome when the store is instrumented', async () => {
    const metrics = createMetrics();
    t = await buildTestApp({ metrics });
    const store = metrics.instrumentStore(t.store);
    await store.createPlant({ id: 5n, name: 'a' });
    const res = await request(t.app).get('/metrics');
    expect(res.text).toMatch(
      /store_operation_duration_seconds_count\{operation="createPlant",outcome="ok"\} 1/,
    );
  });

  it("exports a SQLite store's commit totals as counters, and keeps them on the instrumented store", async () => {
    const metrics = createMetrics();
    t = await buildTestApp({ metrics });
    const store = metrics.instrumentStore(t.store);
    expect(store.commitTotals).toBe(t.store.commitTotals);
    await Promise.all([5n, 6n, 7n].map((id) => store.createPlant({ id, name: 'a' })));
    const res = await request(t.app).get('/metrics');
    const totals = t.store.commitTotals;
    if (TEST_STORE === 'postgres') {
      // PostgreSQL commits and syncs on its own side; it has no totals of the service's to export.
      expect(totals).toBeUndefined();
      expect(res.text).not.toContain('sqlite_group_commits_total');
      expect(res.text).not.toContain('sqlite_wal_checkpoints_handed_back');
      return;
    }
    if (totals === undefined) throw new Error('the SQLite store reports its commit totals');
    expect(totals.writes).toBeGreaterThanOrEqual(3);
    expect(res.text).toContain('# TYPE sqlite_group_commits_total counter');
    expect(res.text).toContain(`\nsqlite_group_commits_total ${totals.commits}\n`);
    expect(res.text).toContain(`\nsqlite_group_commit_writes_total ${totals.writes}\n`);
    expect(res.text).toContain(`\nsqlite_wal_sync_seconds_total ${totals.syncSeconds}\n`);
    expect(res.text).toContain('\nsqlite_wal_checkpoints_handed_back 0\n');
  });

  it('answers If-None-Match: * as the GETs of the contract do, with a 304 and no content', async () => {
    t = await buildTestApp({ metrics: createMetrics() });
    const res = await request(t.app).get('/metrics').set('If-None-Match', '*');
    expect(res.status).toBe(304);
    expect(res.text).toBe('');
    const fresh = await request(t.app)
      .get('/metrics')
      .set('If-None-Match', '*')
      .set('Cache-Control', 'no-cache');
    expect(fresh.status).toBe(200);
  });

  it('answers other methods 405 with Allow: GET, HEAD', async () => {
    t = await buildTestApp({ metrics: createMetrics() });
    for (const res of [
      await request(t.app).post('/metrics').send('x'),
      await request(t.app).delete('/metrics'),
    ]) {
      expectError(res, 405, /is not allowed on \/metrics; allowed: GET, HEAD\.$/);
      expect(res.headers['allow']).toBe('GET, HEAD');
    }
  });

  it('is absent (404) when metrics are turned off', async () => {
    t = await buildTestApp();
    expectError(await request(t.app).get('/metrics'), 404);
    expectError(await request(t.app).post('/metrics'), 404);
  });
});

describe('security headers', () => {
  beforeEach(async () => {
    t = await buildTestApp();
  });

  it('forbid framing, scripts and caching on API answers', async () => {
    for (const res of [await create(1), await request(t.app).get('/nowhere')]) {
      expect(res.headers['content-security-policy']).toBe(
        "default-src 'none';frame-ancestors 'none'",
      );
      expect(res.headers['x-frame-options']).toBe('DENY');
      expect(res.headers['cache-control']).toBe('no-store');
      expect(res.headers['referrer-policy']).toBe('no-referrer');
    }
  });
});

describe('CORS', () => {
  it('is off by default: no CORS headers, and a preflight answers 405', async () => {
    t = await buildTestApp();
    const res = await create(1).set('Origin', 'https://app.example.com');
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
    const preflight = await request(t.app)
      .options('/plants')
      .set('Origin', 'https://app.example.com')
      .set('Access-Control-Request-Method', 'POST');
    expectError(preflight, 405);
  });

  it('answers preflights and exposes headers for a configured origin only', async () => {
    t = await buildTestApp({ corsOrigins: ['https://app.example.com'] });
    const preflight = await request(t.app)
      .options('/plants')
      .set('Origin', 'https://app.example.com')
      .set('Access-Control-Request-Method', 'POST')
      .set('Access-Control-Request-Headers', 'authorization,content-type');
    expect(preflight.status).toBe(204);
    expect(preflight.headers['access-control-allow-origin']).toBe('https://app.example.com');
    expect(preflight.headers['access-control-allow-headers']).toBe(
      'Authorization,Content-Type,X-Request-Id',
    );
    const res = await create(1).set('Origin', 'https://app.example.com');
    expect(res.headers['access-control-allow-origin']).toBe('https://app.example.com');
    expect(res.headers['access-control-expose-headers']).toContain('X-Request-Id');
    const other = await create(2).set('Origin', 'https://evil.example.com');
    expect(other.status).toBe(200);
    expect(other.headers['access-control-allow-origin']).toBeUndefined();
  });

  it.each([
    ['/plants', 'POST'],
    ['/plants/1', 'DELETE'],
    ['/healthz', 'GET, HEAD'],
  ])('answers a preflight to %s with the methods of that path only', async (path, methods) => {
    t = await buildTestApp({ corsOrigins: ['https://app.example.com'] });

    const preflight = await request(t.app)
      .options(path)
      .set('Origin', 'https://app.example.com')
      .set('Access-Control-Request-Method', 'DELETE');

    expect(preflight.status).toBe(204);
    expect(preflight.text).toBe('');
    // RFC 9110 section 8.6: a server must not send Content-Length in a 204.
    expect(preflight.headers['content-length']).toBeUndefined();
    expect(preflight.headers['access-control-allow-methods']).toBe(methods);
    expect(preflight.headers['access-control-max-age']).toBe('600');
    expect(preflight.headers['vary']).toBe('Origin');
  });

  it.each([
    ['an origin not configured', '/plants', 'https://evil.example.com', 'POST', 405],
    ['the origin null', '/plants', 'null', 'POST', 405],
    [
      'no Access-Control-Request-Method (not a preflight)',
      '/plants',
      'https://app.example.com',
      undefined,
      405,
    ],
    ['an empty Access-Control-Request-Method', '/plants', 'https://app.example.com', '', 405],
    ['a path the contract does not have', '/no/such/thing', 'https://app.example.com', 'POST', 404],
  ])(
    'routes an OPTIONS with %s as any OPTIONS, without CORS headers',
    async (_, path, origin, method, status) => {
      t = await buildTestApp({ corsOrigins: ['https://app.example.com'] });
      const options = request(t.app).options(path).set('Origin', origin);
      if (method !== undefined) options.set('Access-Control-Request-Method', method);

      const res = await options;

      expectError(res, status);
      if (status === 405) expect(res.headers['allow']).toBe('POST');
      expect(res.headers['access-control-allow-origin']).toBeUndefined();
      expect(res.headers['access-control-allow-methods']).toBeUndefined();
    },
  );
});

/** The rate limits, all off but the ones given. */
function limitsWith(overrides: Partial<RateLimits>): RateLimits {
  return {
    authFailures: 0,
    authFailureWindowMs: 60_000,
    tokenRequests: 0,
    tokenWindowMs: 60_000,
    ...overrides,
  };
}

/** Sends `requests` pipelined in one write on one connection; the statuses of their answers, in order. */
async function pipelined(requests: readonly string[]): Promise<number[]> {
  const server = t.app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  try {
    const socket = net.connect((server.address() as AddressInfo).port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    // The last asks to close, so the connection ends after the last answer.
    const last = requests[requests.length - 1]!.replace(
      /\r\n\r\n$/,
      '\r\nConnection: close\r\n\r\n',
    );
    socket.write([...requests.slice(0, -1), last].join(''));
    await once(socket, 'close');
    return responsesIn(Buffer.concat(chunks)).map((response) => response.status);
  } finally {
    server.close();
  }
}

function deleteRequest(id: number, token: string): string {
  return `DELETE /plants/${id} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n\r\n`;
}

describe('rate limits', () => {
  it('blocks the requests read together with the failures that blocked their address, a valid token too', async () => {
    t = await buildTestApp({ limits: limitsWith({ authFailures: 3 }) });
    const guesses = Array.from({ length: 8 }, (_, i) => deleteRequest(1, `plnt_guess${i}`));

    const statuses = await pipelined([...guesses, deleteRequest(1, t.token)]);

    expect(statuses).toStrictEqual([401, 401, 401, 429, 429, 429, 429, 429, 429]);
  });

  it('allows exactly the limit of requests per token when they arrive pipelined together', async () => {
    t = await buildTestApp({ limits: limitsWith({ tokenRequests: 5 }) });

    const statuses = await pipelined(
      Array.from({ length: 7 }, (_, i) => deleteRequest(i + 1, t.token)),
    );

    // Counted once authenticated, which a store may finish in another order than the requests came.
    expect(statuses.sort()).toStrictEqual([404, 404, 404, 404, 404, 429, 429]);
  });

  it('answers 429 with Retry-After after repeated failed authentications, even with a valid token', async () => {
    t = await buildTestApp({
      limits: limitsWith({ authFailures: 3 }),
    });
    for (let i = 0; i < 3; i++) expectError(await create(1, 'plnt_guess'), 401);
    const limited = await create(1, 'plnt_guess');
    expectError(limited, 429, /failed authentications/);
    expect(Number(limited.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(Number(limited.headers['retry-after'])).toBeLessThanOrEqual(60);
    expectError(await create(1), 429);
    expect((await request(t.app).get('/healthz')).status).toBe(200);
  });

  it('counts failures per client address (X-Forwarded-For with one trusted proxy)', async () => {
    t = await buildTestApp({
      trustProxyHops: 1,
      limits: limitsWith({ authFailures: 2 }),
    });
    const from = (ip: string, token: string) => create(1, token).set('X-Forwarded-For', ip);
    expectError(await from('203.0.113.1', 'plnt_guess'), 401);
    expectError(await from('203.0.113.1', 'plnt_guess'), 401);
    expectError(await from('203.0.113.1', t.token), 429);
    expect((await from('203.0.113.2', t.token)).status).toBe(200);
  });

  it.each([
    ['a port after an IPv4 address', '203.0.113.1', '203.0.113.1:1234'],
    ['a port after a bracketed IPv6 address', '2001:db8::1', '[2001:db8::1]:443'],
    ['IPv6 brackets', '2001:db8::1', '[2001:db8::1]'],
    ['another value that is not an address', 'not an address', '010.000.000.001'],
  ])('counts %s as the same client', async (_, first, second) => {
    t = await buildTestApp({ trustProxyHops: 1, limits: limitsWith({ authFailures: 2 }) });
    const from = (ip: string, token: string) => create(1, token).set('X-Forwarded-For', ip);
    expectError(await from(first, 'plnt_guess'), 401);
    expectError(await from(first, 'plnt_guess'), 401);

    expectError(await from(second, t.token), 429);
    expect((await from('203.0.113.9', t.token)).status).toBe(200);
  });

  it('lets a blocked address authenticate again once its window has passed', async () => {
    t = await buildTestApp({
      limits: limitsWith({ authFailures: 2, authFailureWindowMs: 1000 }),
    });
    expectError(await create(1, 'plnt_guess'), 401);
    expectError(await create(1, 'plnt_guess'), 401);
    const limited = await create(1);
    expectError(limited, 429);
    expect(limited.headers['retry-after']).toBe('1');
    await new Promise((resolve) => setTimeout(resolve, 1100));
    expect((await create(1)).status).toBe(200);
  });

  it('never counts successful requests', async () => {
    t = await buildTestApp({
      limits: limitsWith({ authFailures: 2 }),
    });
    for (let id = 0; id < 10; id++) expect((await create(id)).status).toBe(200);
  });

  it('limits requests per token when configured', async () => {
    t = await buildTestApp({
      limits: limitsWith({ tokenRequests: 2 }),
    });
    expect((await create(1)).status).toBe(200);
    expect((await create(2)).status).toBe(200);
    const limited = await create(3);
    expectError(limited, 429, /this token/);
    expect(limited.headers['retry-after']).toMatch(/^\d+$/);
    const other = await t.tokens.issue('other');
    expect((await create(3, other.secret)).status).toBe(200);
  });
});

describe('shutdown', () => {
  it('turns readiness to 503 at once and asks keep-alive clients to close', async () => {
    t = await buildTestApp();
    expect((await request(t.app).get('/readyz')).status).toBe(200);
    t.startShutdown();
    const res = await request(t.app).get('/readyz');
    expectError(res, 503, /shutting down/);
    expect(res.headers['retry-after']).toBe('1');
    expect(res.headers['connection']).toBe('close');
    expect((await create(1)).status).toBe(200);
  });
});
