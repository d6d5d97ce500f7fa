import request from 'supertest';
import { buildTestApp, expectError, expectNothingStored, type TestApp } from '../support/test-app';

let t: TestApp;
beforeEach(async () => {
  t = await buildTestApp();
});
afterEach(async () => {
  expect(t.errors).toEqual([]);
  await t.close();
});

const CHALLENGE = 'Bearer realm="plants"';
const INVALID = 'Bearer realm="plants", error="invalid_token"';
const body = '{"id": 1, "name": "a"}';
const post = () => request(t.app).post('/plants').set('Content-Type', 'application/json');

describe('authentication', () => {
  it('returns 401 with a bare challenge when no Authorization header is sent', async () => {
    const res = await post().send(body);
    expectError(res, 401, /bearer token/);
    expect(res.headers['www-authenticate']).toBe(CHALLENGE);
    await expectNothingStored(t);
  });

  it('returns 401 on DELETE without a token', async () => {
    const res = await request(t.app).delete('/plants/1');
    expectError(res, 401);
    expect(res.headers['www-authenticate']).toBe(CHALLENGE);
  });

  it('returns 401 with error="invalid_token" for an unknown token', async () => {
    const res = await post().set('Authorization', 'Bearer plnt_unknown').send(body);
    expectError(res, 401);
    expect(res.headers['www-authenticate']).toBe(INVALID);
    await expectNothingStored(t);
  });

  // However many words it has: a header of another scheme holds no bearer credentials, which RFC
  // 6750 section 3.1 answers 401 with the bare challenge, not 400 (passport-http-bearer's rule).
  it.each<[string, (token: string) => string]>([
    ['Basic credentials', () => `Basic ${Buffer.from('user:pass').toString('base64')}`],
    ['a scheme word alone', () => 'Negotiate'],
    ['a scheme with parameters', () => 'Digest username="a", realm="b"'],
    ['a valid token without the word Bearer', (token) => token],
    ['a valid token after "Bearer="', (token) => `Bearer=${token}`],
    ['a scheme that only starts with Bearer', (token) => `Bearers ${token}`],
    ['an empty header', () => ''],
  ])('returns 401 with a bare challenge for %s', async (_, header) => {
    const res = await post().set('Authorization', header(t.token)).send(body);
    expectError(res, 401, /bearer token/);
    expect(res.headers['www-authenticate']).toBe(CHALLENGE);
    await expectNothingStored(t);
  });

  it.each<[string, (token: string) => string]>([
    ['the word Bearer alone', () => 'Bearer'],
    ['the word in another case alone', () => 'bEARER'],
    ['two tokens', (token) => `Bearer ${token} ${token}`],
    ['two tokens several spaces apart', (token) => `BEARER  ${token}   x`],
    ['two tokens a tab apart', (token) => `Bearer ${token}\tx`],
  ])('returns 400 with error="invalid_request" for %s', async (_, header) => {
    const res = await post().set('Authorization', header(t.token)).send(body);
    expectError(res, 400, /Authorization header is malformed/);
    expect(res.headers['www-authenticate']).toBe('Bearer realm="plants", error="invalid_request"');
    await expectNothingStored(t);
  });

  it('accepts the scheme word in any case and extra spaces before the token', async () => {
    expect((await post().set('Authorization', `bEaReR ${t.token}`).send(body)).status).toBe(200);
    expect(
      (await request(t.app).delete('/plants/1').set('Authorization', `BEARER   ${t.token}`)).status,
    ).toBe(204);
  });

  it('never accepts a token from the query string (RFC 6750 section 5.3)', async () => {
    const res = await post().query({ access_token: t.token }).send(body);
    expectError(res, 401);
    expect(res.headers['www-authenticate']).toBe(CHALLENGE);
    await expectNothingStored(t);
  });

  it('never accepts a token from the body', async () => {
    const res = await post().send(JSON.stringify({ id: 1, name: 'a', access_token: t.token }));
    expectError(res, 401);
    await expectNothingStored(t);
  });

  it('answers 503 in the Error shape and stores nothing when the store is closed as the token is checked', async () => {
    await t.store.close();

    const res = await post().set('Authorization', `Bearer ${t.token}`).send(body);

    expectError(res, 503);
    expect(res.headers['retry-after']).toBe('1');
    await expectNothingStored(t);
  });

  it('rejects a revoked token on the very next request', async () => {
    const issued = await t.tokens.issue('short-lived');
    expect((await post().set('Authorization', `Bearer ${issued.secret}`).send(body)).status).toBe(
      200,
    );
    expect(await t.tokens.revoke(issued.id)).toBe(true);
    const res = await request(t.app)
      .delete('/plants/1')
      .set('Authorization', `Bearer ${issued.secret}`);
    expectError(res, 401);
    expect(res.headers['www-authenticate']).toBe(INVALID);
    expect(await t.readPlants()).toStrictEqual([{ id: 1n, name: 'a', tag: null }]);
  });

  it('answers 401 before reading the body, even when the body is invalid or too large', async () => {
    expectError(await post().send('{not json'), 401);
    expectError(await post().set('Content-Type', 'text/plain').send('x'), 401);
    expectError(await post().send('x'.repeat(1024 * 1024)), 401);
  });
});
