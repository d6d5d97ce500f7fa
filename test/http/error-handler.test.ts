import request from 'supertest';
import { buildTestApp, expectError, type TestApp } from '../support/test-app';

let t: TestApp;
beforeEach(async () => {
  t = await buildTestApp();
});
afterEach(async () => {
  await t.close();
});

describe('unexpected failures', () => {
  it('answer 500 with a generic Error body that leaks no stack, SQL or path, and are logged', async () => {
    // The plants table goes away underneath the running app.
    await t.dropPlantsTable();

    const res = await request(t.app)
      .post('/plants')
      .set('Authorization', `Bearer ${t.token}`)
      .send({ id: 1, name: 'a' });
    expectError(res, 500, /^Internal server error\.$/);
    expect(res.text).not.toMatch(/sqlite|postgres|database|pool|\/tmp|at .*\.ts|Error:/i);
    // The cause, with its stack, goes to the log: once from the error handler, once in the request line.
    const logged = t.errors.map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(logged.map((entry) => entry['message'])).toEqual(['request failed', 'request']);
    // The same id as the request line's, under the same name.
    expect(logged[0]!['reqId']).toBe(logged[1]!['reqId']);
    expect(logged[0]!['reqId']).toBe(res.headers['x-request-id']);
    expect(logged[0]).toMatchObject({
      req: { method: 'POST', path: '/plants' },
      err: { message: expect.any(String), stack: expect.any(String) },
    });
    expect(logged[1]).toMatchObject({ res: { status: 500 }, operationId: 'createPlant' });
  });
});
