import request from 'supertest';
import {
  buildTestApp,
  expectError,
  expectNothingStored,
  sendBytesAsIs,
  type TestApp,
} from '../support/test-app';

let t: TestApp;
beforeEach(async () => {
  t = await buildTestApp();
});
afterEach(async () => {
  expect(t.errors).toEqual([]);
  await t.close();
});

function post(
  body: string | object | undefined,
  contentType: string | undefined = 'application/json',
) {
  let req = request(t.app).post('/plants').set('Authorization', `Bearer ${t.token}`);
  if (contentType !== undefined) req = req.set('Content-Type', contentType);
  return body === undefined
    ? req
    : req.send(typeof body === 'string' ? body : JSON.stringify(body));
}

describe('POST /plants', () => {
  it('returns 200 with exactly {name, tag} when the plant is new', async () => {
    const res = await post({ id: 1, name: 'Monstera deliciosa', tag: 'tropical' });
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/json(;|$)/);
    expect(res.body).toStrictEqual({ name: 'Monstera deliciosa', tag: 'tropical' });
  });

  it('returns the body without a tag key when no tag was sent', async () => {
    const res = await post({ id: 2, name: 'Ficus lyrata' });
    expect(res.status).toBe(200);
    expect(res.text).toBe('{"name":"Ficus lyrata"}');
  });

  it('echoes unicode names and tags exactly', async () => {
    const name = 'Café 🌿 植物 e\u0301 ' + '𝔸'.repeat(200);
    const res = await post({ id: 3, name, tag: '🪴' });
    expect(res.status).toBe(200);
    expect(res.body).toStrictEqual({ name, tag: '🪴' });
  });

  it('accepts names of 255 code points, counting astral characters once', async () => {
    const res = await post({ id: 4, name: '🌵'.repeat(255), tag: 'x'.repeat(255) });
    expect(res.status).toBe(200);
  });

  it('accepts a charset=utf-8 parameter on the media type', async () => {
    expect((await post({ id: 5, name: 'a' }, 'application/json; charset=UTF-8')).status).toBe(200);
    expect((await post({ id: 6, name: 'a' }, 'Application/JSON;charset="utf-8"')).status).toBe(200);
  });

  it('treats 1.0 and 1e2 as the integers 1 and 100', async () => {
    expect((await post('{"id": 1.0, "name": "a"}')).status).toBe(200);
    expect((await post('{"id": 1e2, "name": "b"}')).status).toBe(200);
    expectError(await post('{"id": 1, "name": "c"}'), 409);
    expectError(await post('{"id": 100, "name": "d"}'), 409);
  });

  it('returns 409 and keeps the first plant when the id is taken', async () => {
    await post({ id: 7, name: 'first', tag: 'one' });
    const res = await post({ id: 7, name: 'second', tag: 'two' });
    expectError(res, 409, /7/);
    expect(await t.readPlants()).toStrictEqual([{ id: 7n, name: 'first', tag: 'one' }]);
    const del = await request(t.app).delete('/plants/7').set('Authorization', `Bearer ${t.token}`);
    expect(del.status).toBe(204);
  });

  it('creates an id again after its plant was deleted', async () => {
    await post({ id: 8, name: 'first' });
    await request(t.app).delete('/plants/8').set('Authorization', `Bearer ${t.token}`);
    const res = await post({ id: 8, name: 'again' });
    expect(res.status).toBe(200);
    expect(res.body).toStrictEqual({ name: 'again' });
  });
});

describe('POST /plants with a bad body', () => {
  const cases: ReadonlyArray<readonly [string, string, RegExp]> = [
    ['malformed JSON', '{"id": 1, "name": }', /not valid JSON/],
    ['a trailing comma', '{"id": 10, "name": "a",}', /not valid JSON/],
    ['a name that is a number', '{"id": 10, "name": 5}', /request\/body\/name must be string/],
    ['an id that is a string', '{"id": "10", "name": "a"}', /request\/body\/id must be integer/],
    ['an id of 1.5', '{"id": 1.5, "name": "a"}', /request\/body\/id must be integer/],
    [
      'an id just above an integer',
      '{"id": 10.0000000000000000001, "name": "a"}',
      /^request\/body\/id must be integer$/,
    ],
    ['an id of 1e-400', '{"id": 1e-400, "name": "a"}', /^request\/body\/id must be integer$/],
    [
      'an id of 1e400, an integer beyond any double',
      '{"id": 1e400, "name": "a"}',
      /^request\/body\/id must be between -9223372036854775808 and 9223372036854775807$/,
    ],
    [
      'an id of -1e400',
      '{"id": -1e400, "name": "a"}',
      /^request\/body\/id must be between -9223372036854775808 and 9223372036854775807$/,
    ],
    ['a null name', '{"id": 10, "name": null}', /request\/body\/name/],
    ['a null id', '{"id": null, "name": "a"}', /request\/body\/id/],
    ['a null tag', '{"id": 10, "name": "a", "tag": null}', /request\/body\/tag/],
    ['a missing id', '{"name": "a"}', /request\/body\/id is required/],
    ['a missing name', '{"id": 10}', /request\/body\/name is required/],
    ['an empty name', '{"id": 10, "name": ""}', /request\/body\/name/],
    ['an empty tag', '{"id": 10, "name": "a", "tag": ""}', /request\/body\/tag/],
    [
      'a 256-character name',
      JSON.stringify({ id: 10, name: 'x'.repeat(256) }),
      /request\/body\/name/,
    ],
    [
      'a 256-character tag',
      JSON.stringify({ id: 10, name: 'a', tag: 'x'.repeat(256) }),
      /request\/body\/tag/,
    ],
    [
      'an unknown property',
      '{"id": 10, "name": "a", "color": "green"}',
      /request\/body\/color is not allowed/,
    ],
    [
      'an id above int64',
      '{"id": 9223372036854775808, "name": "a"}',
      /request\/body\/id must be between/,
    ],
    [
      'an id below int64',
      '{"id": -9223372036854775809, "name": "a"}',
      /request\/body\/id must be between/,
    ],
    ['an id of 1e19', '{"id": 1e19, "name": "a"}', /request\/body\/id must be between/],
    ['duplicate keys', '{"id": 10, "name": "a", "name": "b"}', /Duplicate key "name"/],
    ['an array', '[{"id": 10, "name": "a"}]', /request\/body must be object/],
    ['a bare string', '"plant"', /request\/body must be object/],
    ['null', 'null', /request\/body/],
    [
      'a name with U+0000',
      '{"id": 10, "name": "a\\u0000b"}',
      /request\/body\/name must not contain the character U\+0000/,
    ],
    ['an unpaired surrogate', '{"id": 10, "name": "\\ud800"}', /surrogate/],
    ['whitespace only', '   ', /body is required/],
  ];

  it.each(cases)(
    'returns 400 naming the problem for %s, and stores nothing',
    async (_label, body, message) => {
      expectError(await post(body), 400, message);
      await expectNothingStored(t);
    },
  );

  it('returns 400 for an empty body with a JSON content type', async () => {
    expectError(await post(''), 400, /body is required/);
  });

  it('returns 400 when there is neither a body nor a content type', async () => {
    expectError(await post(undefined, undefined), 400, /body is required/);
  });

  it('returns 400 for a body that is not UTF-8', async () => {
    const res = await request(t.app)
      .post('/plants')
      .set('Authorization', `Bearer ${t.token}`)
      .set('Content-Type', 'application/json')
      .serialize(sendBytesAsIs)
      .send(Buffer.from('{"id": 10, "name": "\xff"}', 'latin1'));
    expectError(res, 400, /UTF-8/);
    await expectNothingStored(t);
  });

  it('returns 400 for an unknown query parameter', async () => {
    const res = await request(t.app)
      .post('/plants?dry_run=1')
      .set('Authorization', `Bearer ${t.token}`)
      .set('Content-Type', 'application/json')
      .send('{"id": 10, "name": "a"}');
    expectError(res, 400, /dry_run/);
    await expectNothingStored(t);
  });
});

describe('POST /plants media type and size', () => {
  it.each([
    'text/plain',
    'application/x-www-form-urlencoded',
    'application/merge-patch+json',
    'application/json; charset=utf-16',
  ])('returns 415 for Content-Type %s', async (type) => {
    expectError(await post('{"id": 11, "name": "a"}', type), 415, /application\/json/);
    await expectNothingStored(t);
  });

  it('returns 415 for a body without a Content-Type', async () => {
    const res = await request(t.app)
      .post('/plants')
      .set('Authorization', `Bearer ${t.token}`)
      .serialize(sendBytesAsIs)
      .send(Buffer.from('{"id": 11, "name": "a"}'))
      .unset('Content-Type');
    expectError(res, 415);
    await expectNothingStored(t);
  });

  it('returns 415 for a compressed body', async () => {
    const res = await post('{"id": 11, "name": "a"}').set('Content-Encoding', 'gzip');
    expectError(res, 415, /Content-Encoding/);
    await expectNothingStored(t);
  });

  it('returns 413 for a body over the limit, before looking at its content', async () => {
    const res = await post('x'.repeat(64 * 1024 + 1));
    expectError(res, 413, /65536 bytes/);
  });

  it('accepts a body of exactly the limit', async () => {
    const body = JSON.stringify({ id: 12, name: 'a' });
    const res = await post(body + ' '.repeat(64 * 1024 - body.length));
    expect(res.status).toBe(200);
  });

  it('honours a configured limit', async () => {
    await t.close();
    t = await buildTestApp({ bodyLimitBytes: 100 });
    expectError(await post(JSON.stringify({ id: 13, name: 'x'.repeat(100) })), 413, /100 bytes/);
    await expectNothingStored(t);
  });

  it('checks the media type before the size', async () => {
    expectError(await post('x'.repeat(70 * 1024), 'text/plain'), 415);
  });
});
