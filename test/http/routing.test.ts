import fs from 'node:fs';
import express from 'express';
import request from 'supertest';
import { contractJson, loadOpenApiDocument } from '../../src/http/openapi-document';
import { createServiceHandlers } from '../../src/http/service-handlers';
import { loadSpec } from '../contract/support/spec';
import { buildTestApp, expectError, SPEC_PATH, type TestApp } from '../support/test-app';

let t: TestApp;
beforeEach(async () => {
  t = await buildTestApp();
});
afterEach(async () => {
  expect(t.errors).toEqual([]);
  await t.close();
});

describe('routing', () => {
  it.each(['/', '/plant', '/plants/', '/plants/1/leaves', '/PLANTS', '/doc'])(
    'returns 404 with the Error body for %s, without asking for a token',
    async (path) => {
      expectError(await request(t.app).post(path), 404);
    },
  );

  it.each([
    ['GET', '/plants', 'POST'],
    ['PUT', '/plants', 'POST'],
    ['DELETE', '/plants', 'POST'],
    ['GET', '/plants/1', 'DELETE'],
    ['POST', '/plants/1', 'DELETE'],
    ['PATCH', '/plants/1', 'DELETE'],
    ['OPTIONS', '/plants', 'POST'],
    ['POST', '/healthz', 'GET, HEAD'],
  ])(
    'returns 405 for %s %s with Allow: %s, without asking for a token',
    async (method, path, allow) => {
      const res = await request(t.app)[method.toLowerCase() as 'get'](path);
      expectError(res, 405);
      expect(res.headers['allow']).toBe(allow);
    },
  );
});

describe('query strings (no operation takes a query parameter)', () => {
  it.each([
    ['/healthz?x=1', 'request/query/x is not allowed: the query parameter is unknown'],
    ['/healthz?&&x=1&y=2', 'request/query/x is not allowed: the query parameter is unknown'],
    ['/healthz?a%5B0%5D=1', 'request/query/a is not allowed: the query parameter is unknown'],
    ['/healthz?[x]=1', 'request/query/[x] is not allowed: the query parameter is unknown'],
    ['/healthz?%zz', 'request/query/%zz is not allowed: the query parameter is unknown'],
    ['/healthz?=1', 'request/query is not allowed: the operation takes no query parameters'],
    [
      `/openapi.json?${Array.from({ length: 1000 }, (_, i) => `a[${i}]=1`).join('&')}`,
      'request/query/a is not allowed: the query parameter is unknown',
    ],
  ])('GET %s answers 400: %s', async (target, message) => {
    const res = await request(t.app).get(target);
    expectError(res, 400);
    expect(res.body.message).toBe(message);
  });

  it.each(['/healthz?', '/healthz?&'])('GET %s has no parameter: 200', async (target) => {
    expect((await request(t.app).get(target)).status).toBe(200);
  });

  it('checks the token first: a query to a secured operation without one answers 401', async () => {
    expectError(await request(t.app).delete('/plants/1?x=1'), 401);
    const res = await request(t.app)
      .delete('/plants/1?x=1')
      .set('Authorization', `Bearer ${t.token}`);
    expectError(res, 400, /request\/query\/x/);
  });
});

describe('unauthenticated endpoints', () => {
  it('GET /healthz answers 200 {status: "ok"}', async () => {
    const res = await request(t.app).get('/healthz');
    expect(res.status).toBe(200);
    expect(res.body).toStrictEqual({ status: 'ok' });
  });

  it('GET /readyz answers 200 {status: "ready"} while the store answers', async () => {
    const res = await request(t.app).get('/readyz');
    expect(res.status).toBe(200);
    expect(res.body).toStrictEqual({ status: 'ready' });
  });

  it('GET /readyz probes that arrive while the store is being checked share that check', async () => {
    let checks = 0;
    let arrived = 0;
    const held: (() => void)[] = [];
    const release = () => held.splice(0).forEach((resolve) => resolve());
    const handlers = createServiceHandlers(loadOpenApiDocument(SPEC_PATH), {
      checkStore: async () => {
        checks++;
        await new Promise<void>((resolve) => held.push(resolve));
        await t.store.ping();
      },
      isShuttingDown: () => false,
    });
    const app = express();
    app.get('/readyz', (req, res, next) => {
      arrived++;
      return handlers.getReadiness(req, res, next);
    });
    const probe = () =>
      request(app)
        .get('/readyz')
        .then((res) => res.status);

    const burst = Array.from({ length: 10 }, probe);
    while (arrived < 10) await new Promise((resolve) => setTimeout(resolve, 5));
    release();

    expect(await Promise.all(burst)).toStrictEqual(Array(10).fill(200));
    expect(checks).toBe(1);
    const later = probe();
    while (arrived < 11) await new Promise((resolve) => setTimeout(resolve, 5));
    release();
    expect(await later).toBe(200);
    expect(checks).toBe(2);
  });

  it('GET /readyz answers 503 with Retry-After once the store is gone, while /healthz stays 200', async () => {
    await t.store.close();
    const res = await request(t.app).get('/readyz');
    expectError(res, 503, /store is unavailable/);
    expect(res.headers['retry-after']).toBe('1');
    expect((await request(t.app).get('/healthz')).status).toBe(200);
    t.errors.length = 0;
  });

  it('HEAD /readyz with the store gone: its warning names the request as its request line does', async () => {
    await t.store.close();
    const res = await request(t.app).head('/readyz').set('X-Request-Id', 'head-unavailable');
    expect(res.status).toBe(503);
    const named = t.logs
      .filter((line) => line['reqId'] === 'head-unavailable')
      .map((line) => [line.message, line['req']]);
    expect(named).toEqual([
      ['store unavailable', { method: 'HEAD', path: '/readyz' }],
      ['request', { method: 'HEAD', path: '/readyz' }],
    ]);
  });

  it('HEAD /healthz answers 200 without a body', async () => {
    const res = await request(t.app).head('/healthz');
    expect(res.status).toBe(200);
    expect(res.text).toBeUndefined();
  });

  it('GET /openapi.yaml answers the contract file byte for byte as application/yaml', async () => {
    const res = await request(t.app)
      .get('/openapi.yaml')
      .buffer(true)
      .parse((r, done) => {
        let text = '';
        r.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
        r.on('end', () => done(null, text));
      });
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/yaml/);
    expect(res.body).toBe(fs.readFileSync(SPEC_PATH, 'utf8'));
  });

  it('GET /openapi.json answers the same document as JSON, as contractJson converts it', async () => {
    const res = await request(t.app).get('/openapi.json');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.body).toEqual(loadSpec());
    // contractJson keeps integers beyond 2^53 exact (openapi-document.test.ts).
    expect(res.text).toBe(contractJson(fs.readFileSync(SPEC_PATH, 'utf8')));
  });
});

describe('headers on every response', () => {
  it.each([
    ['a success', () => request(t.app).get('/healthz')],
    ['a 404', () => request(t.app).get('/nowhere')],
    ['a 401', () => request(t.app).delete('/plants/1')],
    [
      'a 204',
      async () => {
        await request(t.app)
          .post('/plants')
          .set('Authorization', `Bearer ${t.token}`)
          .send({ id: 1, name: 'a' });
        return request(t.app).delete('/plants/1').set('Authorization', `Bearer ${t.token}`);
      },
    ],
  ])('sets nosniff and no X-Powered-By on %s', async (_label, send) => {
    const res = await send();
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(res.headers['x-powered-by']).toBeUndefined();
  });
});

interface GetOperation {
  readonly parameters?: readonly { name: string; schema?: { enum?: string[] } }[];
}

/** Every GET target of the contract, a path parameter replaced by each value of its enum. */
function contractGets(): string[] {
  const { paths } = loadSpec() as { paths: Record<string, { get?: GetOperation }> };
  return Object.entries(paths).flatMap(([template, item]) => {
    if (item.get === undefined) return [];
    const param = item.get.parameters?.find(({ name }) => template.includes(`{${name}}`));
    if (param === undefined) return [template];
    return (param.schema?.enum ?? []).map((value) => template.replace(`{${param.name}}`, value));
  });
}

describe('conditional GETs (the contract: NotModified)', () => {
  const GETS = contractGets();

  it('covers every GET of the contract', () => {
    expect(GETS).toEqual(expect.arrayContaining(['/healthz', '/docs/assets/swagger-ui.css']));
    expect(GETS).toHaveLength(8);
  });

  it.each(GETS)(
    'GET %s with If-None-Match: * answers 304 without content, keeping the other headers',
    async (path) => {
      const plain = await request(t.app).get(path);
      expect(plain.status).toBe(200);
      const res = await request(t.app).get(path).set('If-None-Match', '*');
      expect(res.status).toBe(304);
      expect(res.text).toBe('');
      expect(res.headers['content-type']).toBeUndefined();
      expect(res.headers['content-length']).toBeUndefined();
      expect(res.headers['x-content-type-options']).toBe('nosniff');
      expect(res.headers['cache-control']).toBe(plain.headers['cache-control']);
    },
  );

  it.each(GETS)('GET %s ignores the other preconditions and Range: 200 in full', async (path) => {
    const plain = await request(t.app).get(path).buffer(true);
    for (const [name, value] of [
      ['If-None-Match', '"not-the-tag", W/"nor-this"'],
      ['If-Modified-Since', 'Fri, 01 Jan 2100 00:00:00 GMT'],
      ['If-Match', '"not-the-tag"'],
      ['If-Unmodified-Since', 'Thu, 01 Jan 1970 00:00:00 GMT'],
      ['Range', 'bytes=0-9'],
      ['If-None-Match', '*'],
    ] as const) {
      const conditional = request(t.app).get(path).buffer(true).set(name, value);
      // A request that asks to skip caches always gets the representation, even for *.
      if (value === '*') conditional.set('Cache-Control', 'no-cache');
      const res = await conditional;
      expect([name, res.status]).toEqual([name, 200]);
      expect(res.headers['content-length']).toBe(plain.headers['content-length']);
    }
  });

  it('a docs asset has a strong ETag of its bytes, and answers 304 to it, weak or strong', async () => {
    const first = await request(t.app).get('/docs/assets/swagger-ui.css');
    const etag = first.headers['etag'] as string;
    expect(etag).toMatch(/^"[A-Za-z0-9_-]{27}"$/);
    expect(first.headers['cache-control']).toBe('no-cache');
    expect(first.headers['content-type']).toMatch(/^text\/css/);
    expect(first.text).toBe(
      fs.readFileSync(require.resolve('swagger-ui-dist/swagger-ui.css'), 'utf8'),
    );
    for (const tag of [etag, `W/${etag}`, `"other", ${etag}`]) {
      const res = await request(t.app).get('/docs/assets/swagger-ui.css').set('If-None-Match', tag);
      expect([tag, res.status, res.text]).toEqual([tag, 304, '']);
      expect(res.headers['etag']).toBe(etag);
    }
    const head = await request(t.app)
      .head('/docs/assets/swagger-ui.css')
      .set('If-None-Match', etag);
    expect(head.status).toBe(304);
    const other = await request(t.app).get('/docs/assets/docs.js');
    expect(other.headers['etag']).toMatch(/^"[A-Za-z0-9_-]{27}"$/);
    expect(other.headers['etag']).not.toBe(etag);
  });

  it('POST and DELETE do not evaluate If-None-Match', async () => {
    const created = await request(t.app)
      .post('/plants')
      .set('Authorization', `Bearer ${t.token}`)
      .set('If-None-Match', '*')
      .send({ id: 7, name: 'a' });
    expect(created.status).toBe(200);
    const deleted = await request(t.app)
      .delete('/plants/7')
      .set('Authorization', `Bearer ${t.token}`)
      .set('If-None-Match', '*');
    expect(deleted.status).toBe(204);
  });
});
