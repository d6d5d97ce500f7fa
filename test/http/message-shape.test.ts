import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseConfig } from '../../src/config';
import { REQUEST_FIELDS, RESPONSE_FIELDS } from '../../src/http/message-shape';
import { createLogger } from '../../src/logger';
import { createHttpServer } from '../../src/server';
import { buildTestApp, type TestApp } from '../support/test-app';

/** The HTTP server's limits as main.ts gets them with no variables set. */
const HTTP_LIMITS = parseConfig({}).http;
const SILENT = createLogger({ level: 'silent' });

/** node:http's own request objects (as supertest makes them), and the service's server (main.ts). */
const SERVERS: [string, (app: TestApp['app']) => http.Server][] = [
  ['node:http with its own request objects', (app) => http.createServer(app)],
  ['createHttpServer', (app) => createHttpServer(app, HTTP_LIMITS, SILENT)],
];

async function listen(server: http.Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** Properties a request or response may still gain after the preset ones, and why they are not preset. */
const NOT_PRESET = new Set<string>([
  // The validator's own copy of the query, which hides Express's query getter: presetting it would hide it too.
  'query',
  // Node's EventEmitter bookkeeping.
  '_eventsCount',
]);

interface Seen {
  readonly status: number;
  readonly requestAdded: string[];
  readonly responseAdded: string[];
}

function ownKeys(object: object): string[] {
  return Reflect.ownKeys(object)
    .filter((key): key is string => typeof key === 'string')
    .filter((key) => !NOT_PRESET.has(key));
}

describe.each(SERVERS)('the fields preset on every request and response, %s', (_, serve) => {
  let testApp: TestApp;
  let server: http.Server;
  let baseUrl: string;
  const seen: Seen[] = [];

  beforeAll(async () => {
    // As in production: response validation replaces res.json with a wrapper of its own.
    testApp = await buildTestApp({ validateResponses: false });
    server = serve(testApp.app);
    // Runs before the app's own listener: what the request and response are when they reach it.
    server.prependListener('request', (req, res) => {
      const requestBefore = ownKeys(req);
      const responseBefore = ownKeys(res);
      res.on('finish', () => {
        seen.push({
          status: res.statusCode,
          requestAdded: ownKeys(req).filter((key) => !requestBefore.includes(key)),
          responseAdded: ownKeys(res).filter((key) => !responseBefore.includes(key)),
        });
      });
    });
    baseUrl = await listen(server);
  });

  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
    await testApp.close();
  });

  beforeEach(() => {
    seen.length = 0;
  });

  const json = { 'content-type': 'application/json' };
  const requests: [string, number, () => RequestInit & { path: string }][] = [
    ['a created plant', 200, () => post({ id: 1, name: 'Monstera' })],
    ['a deleted plant', 204, () => ({ path: '/plants/1', method: 'DELETE', headers: auth() })],
    ['a request without a token', 401, () => ({ path: '/plants', method: 'POST', headers: json })],
    ['a body that breaks the contract', 400, () => post({ id: 'one', name: 'Monstera' })],
    ['an unknown path', 404, () => ({ path: '/nowhere', method: 'GET' })],
    ['the health check', 200, () => ({ path: '/healthz', method: 'GET' })],
  ];

  function auth(): Record<string, string> {
    return { authorization: `Bearer ${testApp.token}` };
  }

  function post(body: unknown): RequestInit & { path: string } {
    return {
      path: '/plants',
      method: 'POST',
      headers: { ...json, ...auth() },
      body: JSON.stringify(body),
    };
  }

  it.each(requests)(
    'adds no request or response property beyond them for %s',
    async (_, status, make) => {
      const { path, ...init } = make();
      const response = await fetch(baseUrl + path, init);
      await response.arrayBuffer();
      await new Promise((resolve) => setImmediate(resolve));

      expect(response.status).toBe(status);
      expect(seen).toHaveLength(1);
      expect(seen[0]!.requestAdded).toStrictEqual([...REQUEST_FIELDS]);
      expect(seen[0]!.responseAdded).toStrictEqual([...RESPONSE_FIELDS]);
    },
  );
});

describe("createHttpServer's requests and responses", () => {
  let testApp: TestApp;
  let server: http.Server;
  let baseUrl: string;
  const prototypes: { request: unknown; response: unknown; isNodeMessage: boolean }[] = [];

  beforeAll(async () => {
    testApp = await buildTestApp({ validateResponses: true });
    server = createHttpServer(testApp.app, HTTP_LIMITS, SILENT);
    server.prependListener('request', (req, res) => {
      prototypes.push({
        request: Object.getPrototypeOf(req),
        response: Object.getPrototypeOf(res),
        isNodeMessage: req instanceof http.IncomingMessage && res instanceof http.ServerResponse,
      });
    });
    baseUrl = await listen(server);
  });

  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
    await testApp.close();
  });

  it("are born with the app's prototypes, so Express need not change them, and are still node:http's", async () => {
    const response = await fetch(`${baseUrl}/plants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${testApp.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ id: 7, name: 'Monstera', tag: 'tropical' }),
    });

    expect(response.status).toBe(200);
    expect(await response.json()).toStrictEqual({ name: 'Monstera', tag: 'tropical' });
    expect(prototypes).toHaveLength(1);
    expect(prototypes[0]!.request).toBe(testApp.app.request);
    expect(prototypes[0]!.response).toBe(testApp.app.response);
    expect(prototypes[0]!.isNodeMessage).toBe(true);
  });
});
