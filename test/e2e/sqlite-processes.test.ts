import net from 'node:net';
import {
  callApi,
  cleanupChildren,
  runServerToExit,
  startServer,
  startWithToken,
  tempSqlitePath,
  type RunningServer,
} from '../support/server-process';

afterEach(cleanupChildren);

/** The pids of the workers that logged "worker listening", once `count` have (or after 10 s). */
async function listeningWorkers(server: RunningServer, count: number): Promise<number[]> {
  const pids = () => [
    ...new Set(
      [...server.stdout().matchAll(/"pid":(\d+)[^\n]*"message":"worker listening"/g)].map((match) =>
        Number(match[1]),
      ),
    ),
  ];
  for (const deadline = Date.now() + 10_000; pids().length < count && Date.now() < deadline;) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return pids();
}

describe('several processes over one SQLite file (WAL mode)', () => {
  it('deletes through one process a plant created through the other', async () => {
    const sqlitePath = tempSqlitePath();
    const { server: a, token } = await startWithToken({ sqlitePath });
    const b = await startServer({ sqlitePath });
    expect((await callApi(a, token, 'POST', '/plants', '{"id": 1, "name": "shared"}')).status).toBe(
      200,
    );
    expect((await callApi(b, token, 'DELETE', '/plants/1')).status).toBe(204);
    expect((await callApi(a, token, 'DELETE', '/plants/1')).status).toBe(404);
  });

  it('answers exactly one 200 to 50 concurrent creates of one id spread over two processes', async () => {
    const sqlitePath = tempSqlitePath();
    const { server: a, token } = await startWithToken({ sqlitePath });
    const b = await startServer({ sqlitePath });
    const responses = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        callApi(i % 2 === 0 ? a : b, token, 'POST', '/plants', '{"id": 9, "name": "race"}'),
      ),
    );
    const statuses = responses.map((res) => res.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(1);
    expect(statuses.filter((s) => s === 409)).toHaveLength(49);
  });

  it('serves from two workers with WORKERS=2, keeps acknowledged writes, and exits 0 on SIGTERM', async () => {
    const sqlitePath = tempSqlitePath();
    const { server, token } = await startWithToken({ sqlitePath, env: { WORKERS: '2' } });
    expect(await listeningWorkers(server, 2)).toHaveLength(2);
    const created = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        callApi(server, token, 'POST', '/plants', `{"id": ${i}, "name": "p"}`),
      ),
    );
    expect(created.map((res) => res.status)).toEqual(Array(40).fill(200));
    expect(await server.stop('SIGTERM')).toBe(0);

    const again = await startServer({ sqlitePath });
    const deleted = await Promise.all(
      Array.from({ length: 40 }, (_, i) => callApi(again, token, 'DELETE', `/plants/${i}`)),
    );
    expect(deleted.map((res) => res.status)).toEqual(Array(40).fill(204));
  });

  it('with WORKERS=2, answers a request in flight when the whole process group gets SIGTERM', async () => {
    const { server, token } = await startWithToken({
      sqlitePath: tempSqlitePath(),
      env: { WORKERS: '2' },
    });
    const workerPids = await listeningWorkers(server, 2);
    expect(workerPids).toHaveLength(2);
    const body = '{"id": 77, "name": "in flight"}';
    const socket = net.connect(Number(new URL(server.baseUrl).port), '127.0.0.1');
    const received: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => received.push(chunk));
    const closed = new Promise((resolve) => socket.once('close', resolve));
    await new Promise((resolve) => socket.once('connect', resolve));
    socket.write(
      `POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 5)}`,
    );
    await new Promise((resolve) => setTimeout(resolve, 200));

    // As a supervisor signalling the group does: every worker, then the primary, which signals its
    // workers again.
    for (const pid of workerPids) process.kill(pid, 'SIGTERM');
    const stopped = server.stop('SIGTERM');
    await new Promise((resolve) => setTimeout(resolve, 200));
    socket.write(body.slice(5));
    await closed;

    expect(Buffer.concat(received).toString()).toMatch(/^HTTP\/1\.1 200 /);
    expect(await stopped).toBe(0);
  });

  it('exits 1 with WORKERS=2 when the workers cannot listen, instead of replacing them forever', async () => {
    const taken = net.createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = taken.address() as net.AddressInfo;
      const result = await runServerToExit({
        sqlitePath: tempSqlitePath(),
        env: { WORKERS: '2', PORT: String(port) },
      });

      expect(result.code).toBe(1);
      expect(result.stdout).toContain(
        'a worker exited before it listened (see its output): stopping',
      );
      expect(result.stdout).not.toContain('worker exited; starting another');
    } finally {
      taken.close();
    }
  });
});
