import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { REQUEST_FIELDS, RESPONSE_FIELDS } from '../../src/http/message-shape';
import { buildTestApp, type TestApp } from '../support/test-app';

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

describe('the fields preset on every request and response', () => {
  let testApp: TestApp;
  let server: http.Server;
  let baseUrl: string;
  const seen: Seen[] = [];

  beforeAll(async () => {
    // As in production: response validation replaces res.json with a wrapper of its own.
    testApp = await buildTestApp({ validateResponses: false });
    server = http.createServer((req, res) => {
      const requestBefore = ownKeys(req);
      const responseBefore = ownKeys(res);
      res.on('finish', () => {
        seen.push({
          status: res.statusCode,
          requestAdded: ownKeys(req).filter((key) => !requestBefore.includes(key)),
          responseAdded: ownKeys(res).filter((key) => !responseBefore.includes(key)),
        });
      });
      testApp.app(req, res);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
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
