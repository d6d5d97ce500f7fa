import fs from 'node:fs';
import net from 'node:net';
import { logLinesOf, waitFor, type LogLine } from '../support/log-lines';
import { readSqlitePlantIds } from '../support/stored-plants';
import {
  callApi,
  cleanupChildren,
  failingDiskEnv,
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
    // Its 100 Continue says a worker has read and accepted its head: the request is in flight.
    socket.write(
      `POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n` +
        'Expect: 100-continue\r\n\r\n',
    );
    const continued = 'HTTP/1.1 100 Continue\r\n\r\n';
    await waitFor('the 100 Continue', () => Buffer.concat(received).toString() === continued);

    // As a supervisor signalling the group does: every worker, then the primary, which signals its
    // workers again.
    for (const pid of workerPids) process.kill(pid, 'SIGTERM');
    const stopped = server.stop('SIGTERM');
    // Both workers are draining before the body arrives, and say so: the idle one stops at once,
    // and its last lines still reach standard output before it exits.
    const draining = () =>
      logLinesOf(server)
        .filter((line) => line['message'] === 'stopping: draining in-flight requests')
        .map((line) => line['pid']);
    await waitFor('both workers draining', () =>
      workerPids.every((pid) => draining().includes(pid)),
    );
    socket.write(body);
    await closed;

    const answer = Buffer.concat(received).toString().slice(continued.length);
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    expect(await stopped).toBe(0);
    const stoppedPids = logLinesOf(server)
      .filter((line) => line['message'] === 'stopped')
      .map((line) => line['pid']);
    expect(stoppedPids).toEqual(expect.arrayContaining(workerPids));
  });

  it('with WORKERS=2, replaces at once a worker that served for 10 s or more', async () => {
    const { server } = await startWithToken({
      sqlitePath: tempSqlitePath(),
      env: { WORKERS: '2' },
    });
    const [first] = await listeningWorkers(server, 2);
    await new Promise((resolve) => setTimeout(resolve, 10_500));

    process.kill(first!, 'SIGKILL');
    expect(await listeningWorkers(server, 3)).toHaveLength(3);
    const replaced = logLinesOf(server).filter(
      (line) => line['message'] === 'worker exited; starting another',
    );
    expect(replaced).toMatchObject([{ level: 50, worker: first, signal: 'SIGKILL' }]);
    // The 10.5 s of serving, besides the starts of the primary, two workers and a replacement.
  }, 40_000);

  it("with WORKERS=2, stops every worker and exits 1 once a worker's store stops on a failed sync, replacing none", async () => {
    const sqlitePath = tempSqlitePath();
    const failing = `${sqlitePath}.disk-fails`;
    const { server, token } = await startWithToken({
      sqlitePath,
      env: { WORKERS: '2', ...failingDiskEnv(failing), SHUTDOWN_TIMEOUT_MS: '1000' },
    });
    expect(await listeningWorkers(server, 2)).toHaveLength(2);
    const answered: number[] = [];
    let id = 0;
    const write = async () => {
      const plant = ++id;
      const status = await callApi(
        server,
        token,
        'POST',
        '/plants',
        `{"id": ${plant}, "name": "p"}`,
      )
        .then((res) => res.status)
        .catch(() => undefined);
      if (status === 200) answered.push(plant);
      return status;
    };
    for (let i = 0; i < 20; i++) expect(await write()).toBe(200);

    // The disk fails the next sync, the WAL's, of whichever worker commits first; the disk is back
    // at once, so that a replacement, or the other worker, would go on writing.
    fs.writeFileSync(failing, '');
    const stopLine = () =>
      logLinesOf(server).some(
        (line) => line['message'] === 'the store can no longer write safely: stopping',
      );
    for (const deadline = Date.now() + 10_000; !stopLine() && Date.now() < deadline;) await write();
    expect(stopLine()).toBe(true);
    fs.rmSync(failing);
    expect(await server.ended(15_000)).toBe(1);

    const lines = logLinesOf(server);
    expect(lines).toContainEqual(
      expect.objectContaining({
        level: 60,
        message: "a worker's store can no longer write safely: stopping every worker",
      }),
    );
    expect(lines.map((line) => line['message'])).not.toContainEqual(
      expect.stringContaining('starting another'),
    );
    // No worker closed its store: the WAL is left for the next start to recover from.
    expect(fs.statSync(`${sqlitePath}-wal`).size).toBeGreaterThan(0);
    expect(lines).toContainEqual(
      expect.objectContaining({
        level: 60,
        message: "another worker's store can no longer write safely: stopping",
      }),
    );
    // Every write answered 200 is in the file.
    expect(readSqlitePlantIds(sqlitePath)).toEqual(expect.arrayContaining(answered.map(BigInt)));
  }, 40_000);

  it('with WORKERS=2, starts the workers that die soon after they listen with a doubling delay, and serves on', async () => {
    const { server, token } = await startWithToken({
      sqlitePath: tempSqlitePath(),
      env: { WORKERS: '2' },
    });
    let workers = await listeningWorkers(server, 2);
    expect(workers).toHaveLength(2);
    const delayed = () => logLinesOf(server).filter((line) => line['retryInMs'] !== undefined);
    // Each replacement is killed as soon as it listens, well before it has served 10 s.
    for (let killed = 1; killed <= 3; killed++) {
      process.kill(workers[workers.length - 1]!, 'SIGKILL');
      await waitFor('the replacement to be delayed', () => delayed().length === killed, 5000);
      workers = await listeningWorkers(server, 2 + killed);
      expect(workers).toHaveLength(2 + killed);
    }
    const restarts: LogLine[] = delayed();
    expect(restarts.map((line) => line['retryInMs'])).toEqual([500, 1000, 2000]);
    for (const line of restarts) {
      expect(line).toMatchObject({
        level: 50,
        message: 'a worker exited soon after it listened (see its output); starting another later',
        signal: 'SIGKILL',
      });
      expect(line['servedMs']).toBeLessThan(10_000);
    }
    expect(logLinesOf(server).map((line) => line['message'])).not.toContain(
      'worker exited; starting another',
    );
    expect((await callApi(server, token, 'POST', '/plants', '{"id": 1, "name": "p"}')).status).toBe(
      200,
    );
    expect(server.process.exitCode).toBeNull();
  }, 40_000);

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
