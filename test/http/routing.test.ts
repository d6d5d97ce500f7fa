import fs from 'node:fs';
import request from 'supertest';
import YAML from 'yaml';
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

  it('GET /readyz answers 503 with Retry-After once the store is gone, while /healthz stays 200', async () => {
    await t.store.close();
    const res = await request(t.app).get('/readyz');
    expectError(res, 503, /store is unavailable/);
    expect(res.headers['retry-after']).toBe('1');
    expect((await request(t.app).get('/healthz')).status).toBe(200);
    t.errors.length = 0;
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

  it('GET /openapi.json answers the same document as JSON, int64 examples exact', async () => {
    const res = await request(t.app).get('/openapi.json');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.body).toEqual(YAML.parse(fs.readFileSync(SPEC_PATH, 'utf8')));
    expect(res.text).toContain('"id":9223372036854775807');
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
