import request from 'supertest';
import { buildTestApp, expectError, type TestApp } from '../support/test-app';

let t: TestApp;
beforeEach(async () => {
  t = await buildTestApp();
});
afterEach(async () => {
  expect(t.errors).toEqual([]);
  await t.close();
});

const create = (body: string) =>
  request(t.app)
    .post('/plants')
    .set('Authorization', `Bearer ${t.token}`)
    .set('Content-Type', 'application/json')
    .send(body);
const remove = (id: string) =>
  request(t.app).delete(`/plants/${id}`).set('Authorization', `Bearer ${t.token}`);

describe('DELETE /plants/{id}', () => {
  it('returns 204 with an empty body when the plant exists', async () => {
    await create('{"id": 5, "name": "a"}');
    const res = await remove('5');
    expect(res.status).toBe(204);
    expect(res.text).toBe('');
    expect(res.headers['content-type']).toBeUndefined();
    // RFC 9110 section 8.6: a server must not send Content-Length in a 204.
    expect(res.headers['content-length']).toBeUndefined();
  });

  it('returns 404 with the Error body when no plant has the id', async () => {
    expectError(await remove('5'), 404, 'No plant has the id 5.');
  });

  it('returns 404 the second time the same plant is deleted', async () => {
    await create('{"id": 6, "name": "a"}');
    expect((await remove('6')).status).toBe(204);
    expectError(await remove('6'), 404);
  });

  it.each([
    'abc',
    '1.5',
    '1e2',
    '+1',
    '01',
    '-0',
    '0x10',
    '9223372036854775808',
    '-9223372036854775809',
    '%20%31',
    '1%20',
  ])("returns 400 with the contract's one message for a bad id when the id is %s", async (id) => {
    // The same words whether the validator (not an integer) or the handler (not canonical, out of
    // range) refuses it: the contract's invalidPathId example.
    expectError(
      await remove(id),
      400,
      'request/params/id must be a decimal integer between -9223372036854775808 and ' +
        '9223372036854775807, without a plus sign or leading zeros',
    );
  });

  it('does not delete a plant when the id is rejected', async () => {
    await create('{"id": 1, "name": "a"}');
    expectError(await remove('01'), 400);
    expect((await remove('1')).status).toBe(204);
  });

  it('accepts a percent-encoded canonical id', async () => {
    await create('{"id": 17, "name": "a"}');
    expect((await remove('%31%37')).status).toBe(204);
  });

  it.each(['%', '1%2', '%FF', '%C3%28'])(
    'answers 400 naming the path when its percent-encoding is malformed or not UTF-8 (%s)',
    async (id) => {
      expectError(
        await remove(id),
        400,
        `request/plants/${id} is not a valid URI path: its percent-encoding is malformed or not UTF-8`,
      );
    },
  );

  it('ignores a body sent with the request', async () => {
    await create('{"id": 18, "name": "a"}');
    const res = await remove('18').set('Content-Type', 'text/plain').send('ignored');
    expect(res.status).toBe(204);
  });
});

describe('ids over the whole int64 range', () => {
  it('creates 9223372036854775807 and tells it apart from its neighbour', async () => {
    const res = await create('{"id": 9223372036854775807, "name": "max"}');
    expect(res.status).toBe(200);
    expectError(await remove('9223372036854775806'), 404, /9223372036854775806/);
    expect((await remove('9223372036854775807')).status).toBe(204);
  });

  it('round-trips -9223372036854775808', async () => {
    expect((await create('{"id": -9223372036854775808, "name": "min"}')).status).toBe(200);
    expectError(
      await create('{"id": -9223372036854775808, "name": "again"}'),
      409,
      /-9223372036854775808/,
    );
    expect((await remove('-9223372036854775808')).status).toBe(204);
    expectError(await remove('-9223372036854775808'), 404);
  });

  it('keeps 9007199254740992 and 9007199254740993 as distinct plants', async () => {
    expect((await create('{"id": 9007199254740992, "name": "2^53"}')).status).toBe(200);
    expect((await create('{"id": 9007199254740993, "name": "2^53 + 1"}')).status).toBe(200);
    expect((await remove('9007199254740993')).status).toBe(204);
    expect((await remove('9007199254740992')).status).toBe(204);
    expectError(await remove('9007199254740993'), 404);
  });

  it('reads ids written with an exponent exactly', async () => {
    expect((await create('{"id": 9.007199254740993e15, "name": "a"}')).status).toBe(200);
    expect((await remove('9007199254740993')).status).toBe(204);
  });
});
