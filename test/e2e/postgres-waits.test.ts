import { createTestSchema, describeWithPostgres, type TestSchema } from '../support/postgres';
import { withClient } from '../support/postgres-database';
import {
  callApi,
  cleanupChildren,
  startWithToken,
  type RunningServer,
} from '../support/server-process';
import { readPostgresPlants } from '../support/stored-plants';

const STATEMENT_TIMEOUT_MS = 3000;
/** Shorter than the statement time-out: what it bounds is the client's stalls, not the store's. */
const INACTIVITY_TIMEOUT_MS = 1000;

let schema: TestSchema | undefined;
let server: RunningServer;
let token: string;

beforeEach(async () => {
  schema = await createTestSchema();
  ({ server, token } = await startWithToken({
    env: {
      DATABASE_URL: schema.url,
      PG_STATEMENT_TIMEOUT_MS: String(STATEMENT_TIMEOUT_MS),
      INACTIVITY_TIMEOUT_MS: String(INACTIVITY_TIMEOUT_MS),
    },
  }));
});
afterEach(async () => {
  await cleanupChildren();
  await schema?.drop();
});

describeWithPostgres('a request waiting for PostgreSQL, with a short INACTIVITY_TIMEOUT_MS', () => {
  it('gets its 503 from the statement time-out, its connection kept open while the server waits', async () => {
    const outcomes = await withClient(schema!.url, async (locker) => {
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE plants IN ACCESS EXCLUSIVE MODE');
      try {
        // Two at once, each on a connection of its own.
        return await Promise.all(
          [1, 2].map(async (id) => {
            const started = performance.now();
            const response = await callApi(
              server,
              token,
              'POST',
              '/plants',
              `{"id":${id},"name":"p"}`,
            );
            return {
              status: response.status,
              body: await response.json(),
              ms: performance.now() - started,
            };
          }),
        );
      } finally {
        await locker.query('ROLLBACK');
      }
    });

    for (const outcome of outcomes) {
      expect(outcome).toEqual({
        status: 503,
        body: { error: 503, message: expect.any(String) },
        ms: expect.any(Number),
      });
      expect(outcome.ms).toBeGreaterThanOrEqual(STATEMENT_TIMEOUT_MS - 100);
    }
    expect(await readPostgresPlants(schema!.url)).toEqual([]);
    const metrics = await (await fetch(`${server.baseUrl}/metrics`)).text();
    expect(metrics).toMatch(/^http_connections_timed_out_total 0$/m);
    // The store serves again once the lock is gone.
    expect((await callApi(server, token, 'POST', '/plants', '{"id":1,"name":"p"}')).status).toBe(
      200,
    );
  });
});
