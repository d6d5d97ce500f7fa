import net from 'node:net';
import { parseResponse, rawExchange, type ParsedResponse } from '../reliability/support/raw';
import { requestLineOf } from '../support/log-lines';
import { cleanupChildren, startWithToken, type RunningServer } from '../support/server-process';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

let server: RunningServer;
let token: string;
let target: { host: string; port: number };

beforeAll(async () => {
  ({ server, token } = await startWithToken({ env: { HEADERS_TIMEOUT_MS: '1000' } }));
  const url = new URL(server.baseUrl);
  target = { host: url.hostname, port: Number(url.port) };
});
afterAll(cleanupChildren);

function send(
  head: string,
  body = '',
  options: { noBody?: boolean; idleMs?: number; maxMs?: number } = {},
) {
  const bytes = Buffer.from(
    `${head}\r\n${body === '' ? '' : `Content-Length: ${Buffer.byteLength(body)}\r\n`}\r\n${body}`,
  );
  return rawExchange(target, bytes, {
    noBody: options.noBody ?? false,
    idleMs: options.idleMs ?? 500,
    maxMs: options.maxMs ?? 3000,
  });
}

function errorOf(outcome: Awaited<ReturnType<typeof send>>): { status: number; body: unknown } {
  const response = outcome.response!;
  return {
    status: response.status,
    body: response.body.length === 0 ? undefined : JSON.parse(response.body.toString('utf8')),
  };
}

const post = (target: string, body: string) =>
  send(
    `POST ${target} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json`,
    body,
  );

describe('the request line of an answered request', () => {
  it('has no aborted field when the answer was written whole', async () => {
    const outcome = await send('GET /healthz HTTP/1.1\r\nHost: x\r\nX-Request-Id: answered');
    expect(outcome.response?.status).toBe(200);

    const line = await requestLineOf(server, 'answered');
    expect(line).toMatchObject({ res: { status: 200 } });
    expect(line).not.toHaveProperty('aborted');
  });
});

describe('a conditional GET', () => {
  it.each(['no-cache', 'NO-CACHE', 'max-age=0, No-Cache'])(
    'gets the representation, not a 304, when Cache-Control is %s',
    async (cacheControl) => {
      const request = (extra: string) =>
        send(`GET /openapi.json HTTP/1.1\r\nHost: x\r\nIf-None-Match: *${extra}`);

      expect((await request('')).response?.status).toBe(304);
      expect((await request(`\r\nCache-Control: ${cacheControl}`)).response?.status).toBe(200);
    },
  );
});

describe('request targets and framing', () => {
  it('validates an absolute-form target exactly like its origin form', async () => {
    expect(errorOf(await post('http://127.0.0.1/plants', '{"id": 1, "name": ""}'))).toEqual({
      status: 400,
      body: { error: 400, message: expect.stringContaining('request/body/name') },
    });
    expect(
      errorOf(await post('http://127.0.0.1/plants', '{"id": 1, "name": "x", "extra": 1}')).status,
    ).toBe(400);
    expect(errorOf(await post('http://127.0.0.1/plants', '{"id": 1, "name": "a"}'))).toEqual({
      status: 200,
      body: { name: 'a' },
    });
  });

  // The third column: the plant that the target would name with its dot segments resolved, created
  // first, so that a DELETE routed to it would delete it and answer 204.
  it.each<[string, string, number | undefined]>([
    ['/nope/../metrics', 'GET', undefined],
    ['/a/%2e%2e/metrics', 'GET', undefined],
    ['/a/%2E%2E/healthz', 'GET', undefined],
    ['/a\\..\\metrics', 'GET', undefined],
    ['/healthz/../plants/3', 'DELETE', 3],
  ])(
    'routes the absolute form of %s as its origin form, with no dot segment resolved (%s)',
    async (path, method, plant) => {
      const request = (requestTarget: string) =>
        send(`${method} ${requestTarget} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}`);
      const deletePlant = () =>
        send(`DELETE /plants/${plant} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}`);
      if (plant !== undefined) {
        expect(errorOf(await post('/plants', `{"id": ${plant}, "name": "kept"}`)).status).toBe(200);
      }

      const origin = errorOf(await request(path));
      const absolute = errorOf(await request(`http://x${path}`));

      expect(origin).toEqual({
        status: 404,
        body: { error: 404, message: `No resource at ${path}.` },
      });
      expect(absolute).toEqual(origin);
      // The plant is still there; deleted now, as a later case creates its id afresh.
      if (plant !== undefined) expect(errorOf(await deletePlant()).status).toBe(204);
    },
  );

  it.each([
    ['GET', 'http:///healthz'],
    ['GET', 'http:///plants'],
    ['GET', 'http://x:99999/healthz'],
    ['GET', 'http://[::1/healthz'],
    ['GET', 'http://'],
    ['GET', 'http://x:99999/openapi.json'],
    ['GET', 'http://x:99999/docs/assets/docs.js'],
    ['DELETE', 'http://x:99999/plants/1'],
    // URLs of other schemes: some have no path at all.
    ['GET', 'foo://x'],
    ['GET', 'foo://x?a=1'],
    ['OPTIONS', 'foo://h'],
    ['POST', 'foo://x'],
    ['GET', 'ftp://x/healthz'],
  ])(
    'answers 400 through the app to %s %s, an absolute-form target that is not an http(s) URL',
    async (method, requestTarget) => {
      const outcome = await send(
        `${method} ${requestTarget} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}`,
      );
      expect(errorOf(outcome)).toEqual({
        status: 400,
        body: {
          error: 400,
          message: 'The request target must be a path, or an http or https URL.',
        },
      });
      const { headers } = outcome.response!;
      expect(headers['content-type']).toBe('application/json; charset=utf-8');
      // helmet's headers: the app answered, not Express's fallback or the server.
      expect(headers['x-frame-options']).toBe('DENY');
      const reqId = headers['x-request-id'] as string;
      expect(reqId).toMatch(UUID);
      expect(await requestLineOf(server, reqId)).toMatchObject({
        req: { method },
        res: { status: 400 },
      });
    },
  );

  it('logs an absolute-form target that is not a URL without the credentials in it', async () => {
    const outcome = await send('GET http://user:s3cret@x:99999/healthz HTTP/1.1\r\nHost: x');
    expect(errorOf(outcome).status).toBe(400);

    const line = await requestLineOf(server, outcome.response!.headers['x-request-id'] as string);
    expect(line).toMatchObject({ req: { method: 'GET', path: '/#http://x:99999/healthz' } });
    expect(JSON.stringify(line)).not.toContain('s3cret');
  });

  it('stores nothing sent to an absolute-form target that is not a URL, and still serves valid ones', async () => {
    expect(errorOf(await post('http://x:99999/plants', '{"id": 3, "name": "c"}')).status).toBe(400);
    expect(errorOf(await post('/plants', '{"id": 3, "name": "c"}')).status).toBe(200);
    expect(
      errorOf(await send('GET http://127.0.0.1:8080/healthz HTTP/1.1\r\nHost: x')).status,
    ).toBe(200);
  });

  it.each([
    ['GET', '/healthz\xa0'],
    ['GET', '/openapi.json\t'],
    ['GET', '/healthz\x0c'],
    ['GET', '/h\xc3\xa9'],
    ['DELETE', '/plants/14\xa0'],
    ['DELETE', '/plants/14\t'],
  ])(
    'answers 400 to %s %j, whose target holds a byte no target may hold, and deletes nothing',
    async (method, path) => {
      // Routed by a parser that trims such bytes, `/plants/14<0xA0>` would delete plant 14.
      expect(errorOf(await post('/plants', '{"id": 14, "name": "kept"}')).status).toBeLessThan(500);
      const outcome = await rawExchange(
        target,
        Buffer.from(
          `${method} ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n\r\n`,
          'latin1',
        ),
        { noBody: false, idleMs: 500, maxMs: 3000 },
      );
      expect(errorOf(outcome)).toEqual({
        status: 400,
        body: { error: 400, message: 'The request could not be parsed as HTTP/1.1.' },
      });
      expect(errorOf(await post('/plants', '{"id": 14, "name": "kept"}'))).toEqual({
        status: 409,
        body: { error: 409, message: 'A plant with the id 14 already exists.' },
      });
    },
  );

  it('answers 400 to a target with a fragment, and stores nothing', async () => {
    expect(errorOf(await post('/plants#x', '{"id": 2, "name": "b"}'))).toEqual({
      status: 400,
      body: { error: 400, message: 'A request target must not contain a fragment (#).' },
    });
    expect(errorOf(await post('/plants', '{"id": 2, "name": "b"}')).status).toBe(200);
  });

  it('validates HEAD as the GET it mirrors, and answers without a body', async () => {
    const asset = await send('HEAD /docs/assets/nope HTTP/1.1\r\nHost: x', '', { noBody: true });
    expect(asset.response?.status).toBe(400);
    const query = await send('HEAD /healthz?x=1 HTTP/1.1\r\nHost: x', '', { noBody: true });
    expect(query.response?.status).toBe(400);
    expect(query.response?.rest.length).toBe(0);
  });

  it('answers a HEAD it cannot parse without a body, also when it arrives after another request in one chunk', async () => {
    const alone = await send('HEAD /plants/N\u00a1 HTTP/1.1\r\nHost: x', '', { noBody: true });
    expect(alone.response?.status).toBe(400);
    expect(alone.response?.rest.length).toBe(0);

    // A POST answered before its body arrived; then the rest of that body and a HEAD in one
    // chunk, so the chunk Node fails on starts with the POST's body.
    const socket = net.connect(target.port, target.host);
    let received = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => (received = Buffer.concat([received, chunk])));
    const closed = new Promise((resolve) => socket.once('close', resolve));
    socket.write('POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\n');
    while (typeof parseResponse(received, false) !== 'object') {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    const first = parseResponse(received, false) as ParsedResponse;
    expect(first.status).toBe(405);
    received = Buffer.alloc(0);
    socket.write(Buffer.from('abcHEAD /plants/N\u00a1 HTTP/1.1\r\nHost: x\r\n\r\n', 'latin1'));
    await closed;
    const answer = parseResponse(received, true) as ParsedResponse;
    expect(answer.status).toBe(400);
    expect(answer.rest.toString('latin1')).toBe('');
  });

  it('answers 431 to headers over the limit without a body to a HEAD only, whatever methods its headers name', async () => {
    const big = `X-Big: ${'a'.repeat(17 * 1024)}`;
    const error = { error: 431, message: 'The request headers are too large.' };
    // A header's value that is a method's name, and one that reads like a request line without its
    // version: neither is where the request began.
    const head = await send(
      `HEAD /healthz HTTP/1.1\r\nHost: x\r\nX-Method: DELETE\r\nX-Note: POST /plants\r\n${big}`,
      '',
      { noBody: true },
    );
    expect(head.response?.status).toBe(431);
    expect(head.response?.headers['content-length']).toBe(String(JSON.stringify(error).length));
    expect(head.response?.rest.length).toBe(0);
    // A header named as a method is not one either: a GET gets the body.
    expect(errorOf(await send(`GET /healthz HTTP/1.1\r\nHost: x\r\nHEAD: x\r\n${big}`))).toEqual({
      status: 431,
      body: error,
    });
  });

  it('logs the 400 to a HEAD whose body breaks as a HEAD, which the app routes as a GET', async () => {
    const outcome = await send(
      'HEAD /healthz HTTP/1.1\r\nHost: x\r\nX-Request-Id: head-broken-body\r\n' +
        'Transfer-Encoding: chunked\r\n\r\nzz\r\n',
      '',
      { noBody: true },
    );
    expect(outcome.response?.status).toBe(400);

    expect(await requestLineOf(server, 'head-broken-body')).toMatchObject({
      req: { method: 'HEAD', path: '/healthz' },
      res: { status: 400 },
    });
  });

  it('answers a POST whose chunked body breaks off with the body of its 400, even when the body says HEAD', async () => {
    const outcome = await rawExchange(
      target,
      Buffer.from(
        `POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n` +
          'Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n' +
          '5\r\nHEAD \r\nZZZ\r\n',
      ),
      { noBody: false, idleMs: 500, maxMs: 3000 },
    );
    expect(errorOf(outcome)).toEqual({
      status: 400,
      body: { error: 400, message: 'The request could not be parsed as HTTP/1.1.' },
    });
  });

  it('answers 400 to a request of another HTTP version that node:http takes, HTTP/2.0 or HTTP/0.9', async () => {
    const otherVersion = {
      status: 400,
      body: { error: 400, message: 'The request must be HTTP/1.1 or HTTP/1.0.' },
    };
    expect(errorOf(await send('GET /healthz HTTP/2.0\r\nHost: x'))).toEqual(otherVersion);
    expect(errorOf(await send('GET /healthz HTTP/0.9'))).toEqual(otherVersion);
    expect(errorOf(await send('GET /healthz'))).toEqual(otherVersion);
    expect(
      errorOf(
        await send(
          `POST /plants HTTP/2.0\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json`,
          '{"id": 12, "name": "two"}',
        ),
      ),
    ).toEqual(otherVersion);
    expect(errorOf(await post('/plants', '{"id": 12, "name": "one"}')).status).toBe(200);
  });

  it('answers an HTTP/1.1 request without Host with the Error body', async () => {
    expect(errorOf(await send('GET /healthz HTTP/1.1'))).toEqual({
      status: 400,
      body: { error: 400, message: 'An HTTP/1.1 request needs a Host header.' },
    });
    expect(errorOf(await send('GET /healthz HTTP/1.0')).status).toBe(200);
  });

  it('answers 400 to two Host lines or a Host that is no host, and takes an empty one or an IP literal', async () => {
    const badHost = {
      status: 400,
      body: {
        error: 400,
        message: 'A request needs one Host header holding a host and perhaps a port.',
      },
    };
    expect(errorOf(await send('GET /healthz HTTP/1.1\r\nHost: x\r\nHost: y'))).toEqual(badHost);
    expect(errorOf(await send('GET /healthz HTTP/1.1\r\nHost: x\r\nHost: x'))).toEqual(badHost);
    expect(errorOf(await send('GET /healthz HTTP/1.1\r\nHost: a b'))).toEqual(badHost);
    expect(errorOf(await send('GET /healthz HTTP/1.0\r\nHost: x/y'))).toEqual(badHost);
    expect(errorOf(await send('GET /healthz HTTP/1.1\r\nHost:')).status).toBe(200);
    expect(errorOf(await send('GET /healthz HTTP/1.1\r\nHost: [::1]:8080')).status).toBe(200);
    expect(errorOf(await send('GET /healthz HTTP/1.1\r\nHost: plants.example:443')).status).toBe(
      200,
    );
    // A POST with two Host lines stores nothing.
    expect(
      errorOf(
        await send(
          `POST /plants HTTP/1.1\r\nHost: x\r\nHost: y\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json`,
          '{"id": 7, "name": "twice"}',
        ),
      ),
    ).toEqual(badHost);
    expect(errorOf(await post('/plants', '{"id": 7, "name": "once"}')).status).toBe(200);
  });

  it.each([
    ['a second token', `Bearer plnt_other`, 8],
    ['an empty second line', '', 9],
    ['a line of another scheme', 'Basic dXNlcjpwYXNz', 10],
  ])(
    'answers 400 to two Authorization lines, even when one holds a valid token: %s',
    async (_, second, id) => {
      const malformed = {
        status: 400,
        body: {
          error: 400,
          message: 'The Authorization header is malformed: send "Authorization: Bearer <token>".',
        },
      };
      for (const [first, last] of [
        [`Bearer ${token}`, second],
        [second, `Bearer ${token}`],
      ]) {
        const twice = await send(
          `POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: ${first}\r\nAuthorization: ${last}\r\nContent-Type: application/json`,
          `{"id": ${id}, "name": "twice"}`,
        );
        expect(errorOf(twice)).toEqual(malformed);
      }
      expect(errorOf(await post('/plants', `{"id": ${id}, "name": "once"}`)).status).toBe(200);
    },
  );

  it('answers 401, not 400, to one Authorization line with a comma, which is no bearer token', async () => {
    for (const header of ['Basic a,b', 'Bearer plnt_a,b']) {
      const res = await send(
        `POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: ${header}\r\nContent-Type: application/json`,
        '{"id": 13, "name": "comma"}',
      );
      expect(errorOf(res).status).toBe(401);
    }
  });

  it('answers 415 to a body with a transfer coding other than chunked, and stores nothing', async () => {
    const chunkedPost = (codings: string, json: string) =>
      rawExchange(
        target,
        Buffer.from(
          `POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n` +
            `Content-Type: application/json\r\nTransfer-Encoding: ${codings}\r\n\r\n` +
            `${Buffer.byteLength(json).toString(16)}\r\n${json}\r\n0\r\n\r\n`,
        ),
        { noBody: false, idleMs: 500, maxMs: 3000 },
      );

    expect(errorOf(await chunkedPost('gzip, chunked', '{"id": 11, "name": "coded"}'))).toEqual({
      status: 415,
      body: {
        error: 415,
        message: 'The request body must not have a transfer coding but chunked.',
      },
    });
    expect(errorOf(await chunkedPost('Chunked', '{"id": 11, "name": "plain"}'))).toEqual({
      status: 200,
      body: { name: 'plain' },
    });
  });

  it('ignores an expectation it does not support instead of answering 417', async () => {
    expect(
      errorOf(await send('GET /healthz HTTP/1.1\r\nHost: x\r\nExpect: something')).status,
    ).toBe(200);
  });

  it('answers 408 with the Error body when headers do not arrive within HEADERS_TIMEOUT_MS', async () => {
    const started = Date.now();
    const outcome = await rawExchange(
      target,
      Buffer.from('GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: '),
      {
        noBody: false,
        idleMs: 6000,
        maxMs: 6000,
      },
    );
    expect(errorOf(outcome)).toEqual({
      status: 408,
      body: { error: 408, message: 'The request took too long to arrive.' },
    });
    expect(Date.now() - started).toBeLessThan(3500);
  });
});
