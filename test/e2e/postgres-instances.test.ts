import { createTestSchema, describeWithPostgres, type TestSchema } from '../support/postgres';
import {
  callApi,
  cleanupChildren,
  developmentTokens,
  runTokenCli,
  startServer,
  startWithToken,
  tempSqlitePath,
  type RunningServer,
} from '../support/server-process';

let schema: TestSchema;
afterEach(async () => {
  await cleanupChildren();
  await schema?.drop();
});

/** Two server processes over one fresh schema; the first start prints the development token. */
async function twoInstances(): Promise<{ a: RunningServer; b: RunningServer; token: string }> {
  schema = await createTestSchema();
  const env = { DATABASE_URL: schema.url };
  const { server: a, token } = await startWithToken({ env });
  const b = await startServer({ sqlitePath: tempSqlitePath(), env });
  expect(developmentTokens(b.output())).toEqual([]);
  return { a, b, token };
}

describeWithPostgres('several instances over one PostgreSQL database', () => {
  it('deletes through one instance a plant created through the other', async () => {
    const { a, b, token } = await twoInstances();
    const created = await callApi(
      a,
      token,
      'POST',
      '/plants',
      '{"id": 9223372036854775807, "name": "shared"}',
    );
    expect(created.status).toBe(200);
    expect((await callApi(b, token, 'DELETE', '/plants/9223372036854775807')).status).toBe(204);
    expect((await callApi(a, token, 'DELETE', '/plants/9223372036854775807')).status).toBe(404);
  });

  it('answers exactly one 200 to 50 concurrent creates of one id spread over both', async () => {
    const { a, b, token } = await twoInstances();
    const responses = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        callApi(i % 2 === 0 ? a : b, token, 'POST', '/plants', '{"id": 77, "name": "race"}'),
      ),
    );
    const statuses = responses.map((res) => res.status).sort();
    expect(statuses.filter((s) => s === 200)).toHaveLength(1);
    expect(statuses.filter((s) => s === 409)).toHaveLength(49);
  });

  it('accepts a token created by the CLI on every instance, and a revocation applies to all at once', async () => {
    const { a, b } = await twoInstances();
    const created = await runTokenCli(['create', '--name', 'shared'], { DATABASE_URL: schema.url });
    expect(created.code).toBe(0);
    const [, id, secret] = /^Created token (\S+) .*\n(plnt_\S+)\n$/.exec(created.stdout) ?? [];
    expect((await callApi(a, secret!, 'POST', '/plants', '{"id": 1, "name": "a"}')).status).toBe(
      200,
    );
    expect((await callApi(b, secret!, 'DELETE', '/plants/1')).status).toBe(204);
    expect((await runTokenCli(['revoke', id!], { DATABASE_URL: schema.url })).code).toBe(0);
    expect((await callApi(a, secret!, 'DELETE', '/plants/1')).status).toBe(401);
    expect((await callApi(b, secret!, 'DELETE', '/plants/1')).status).toBe(401);
  });

  it('serves from several worker processes with WORKERS=2 and stops them all on SIGTERM', async () => {
    schema = await createTestSchema();
    const server = await startServer({
      sqlitePath: tempSqlitePath(),
      env: { DATABASE_URL: schema.url, WORKERS: '2' },
    });
    const [token] = developmentTokens(server.output());
    const listening = () => server.stdout().match(/"message":"worker listening"/g)?.length ?? 0;
    for (const deadline = Date.now() + 10_000; listening() < 2 && Date.now() < deadline;) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(listening()).toBe(2);
    const responses = await Promise.all(
      Array.from({ length: 50 }, () =>
        callApi(server, token!, 'POST', '/plants', '{"id": 5, "name": "race"}'),
      ),
    );
    expect(responses.map((res) => res.status).filter((s) => s === 200)).toHaveLength(1);
    expect(await server.stop('SIGTERM')).toBe(0);
  });
});
