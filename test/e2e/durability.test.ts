import fs from 'node:fs';
import net from 'node:net';
import { logLinesOf, waitFor, type LogLine } from '../support/log-lines';
import {
  answerHungDisk,
  cleanupChildren,
  createToken,
  failingDiskEnv,
  hangingDiskEnv,
  runServerToExit,
  startServer,
  tempSqlitePath,
  type ChildEnv,
  type RunningServer,
} from '../support/server-process';
import { readSqlitePlantIds } from '../support/stored-plants';
import { DEFAULT_CHECKPOINT_EVERY_WRITES } from '../../src/store/sqlite/wal-checkpoints';

interface Answer {
  readonly status: number;
  readonly body: unknown;
}

/** POSTs the JSON text exactly as given, so that ids beyond 2^53 reach the server unrounded. */
async function postRaw(baseUrl: string, token: string, json: string): Promise<Answer> {
  const response = await fetch(`${baseUrl}/plants`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: json,
  });
  return { status: response.status, body: (await response.json()) as unknown };
}

async function deletePlant(baseUrl: string, token: string, id: string): Promise<Answer> {
  const response = await fetch(`${baseUrl}/plants/${id}`, {
    method: 'DELETE',
    headers: { Authorization: `Bearer ${token}` },
  });
  const text = await response.text();
  return { status: response.status, body: text === '' ? undefined : (JSON.parse(text) as unknown) };
}

function countStatuses(answers: readonly Answer[]): Record<number, number> {
  const counts: Record<number, number> = {};
  for (const { status } of answers) counts[status] = (counts[status] ?? 0) + 1;
  return counts;
}

/**
 * A server (FULL) over a new SQLite file whose disk the file `flag` drives (`diskEnv` gives the
 * environment that makes it so), with `env` besides, and a token for it.
 * Given `flagFromStart`, the flag exists from the start with that content.
 */
async function startOnDisk(
  diskEnv: (flag: string) => ChildEnv,
  env: ChildEnv,
  flagFromStart?: string,
) {
  const sqlitePath = tempSqlitePath();
  const flag = `${sqlitePath}.disk-flag`;
  const token = await createToken(sqlitePath, 'e2e');
  if (flagFromStart !== undefined) fs.writeFileSync(flag, flagFromStart);
  const server = await startServer({ sqlitePath, env: { ...diskEnv(flag), ...env } });
  return { sqlitePath, flag, token, server };
}

/**
 * A server (FULL) over a new SQLite file whose fdatasyncs fail while the file `failing` exists,
 * or only those of files whose path ends with `ofFilesEndingWith`; a token for it, and its exit
 * code to come. With `failingFromStart`, the disk fails from the start.
 */
async function startOnFailingDisk(options: {
  shutdownTimeoutMs: number;
  ofFilesEndingWith?: string;
  failingFromStart?: boolean;
}) {
  const { flag, ...started } = await startOnDisk(
    (failing) => failingDiskEnv(failing, options.ofFilesEndingWith),
    { SHUTDOWN_TIMEOUT_MS: String(options.shutdownTimeoutMs) },
    options.failingFromStart === true ? '' : undefined,
  );
  return { ...started, failing: flag };
}

/** The lines in which the server says its store can no longer write safely. */
function storeStops(server: RunningServer): LogLine[] {
  return logLinesOf(server).filter(
    (line) => line['message'] === 'the store can no longer write safely: stopping',
  );
}

/**
 * 32 clients create plants with ids 1, 2, 3, … up to `lastId`, until one is refused or cut off:
 * each id's status, and the ids cut off unanswered.
 */
async function createInOrder(server: RunningServer, token: string, lastId: number) {
  const statuses = new Map<number, number>();
  const unanswered: number[] = [];
  let nextId = 1;
  let stopped = false;
  const client = async () => {
    while (!stopped && nextId <= lastId) {
      const id = nextId++;
      try {
        const { status } = await postRaw(server.baseUrl, token, `{"id": ${id}, "name": "p"}`);
        statuses.set(id, status);
        if (status !== 200) stopped = true;
      } catch {
        unanswered.push(id);
        stopped = true;
      }
    }
  };
  await Promise.all(Array.from({ length: 32 }, client));
  const withStatus = (wanted: number) =>
    [...statuses].filter(([, status]) => status === wanted).map(([id]) => id);
  return { statuses, answered: withStatus(200), refused: withStatus(503), unanswered };
}

/**
 * The ids of the plants a SQLite file holds, read as the restart will read it (through the WAL), over
 * a read-only connection that leaves the file and its WAL as they were for the restart.
 */
function storedIds(sqlitePath: string): Set<number> {
  return new Set(readSqlitePlantIds(sqlitePath).map(Number));
}

/**
 * Restarts a server over the file and checks that it writes again: the plant `storedId`, answered
 * 200 before, is there to delete, and a plant with the free id `newId` is created.
 */
async function expectWritesAfterRestart(
  sqlitePath: string,
  token: string,
  storedId: string,
  newId: number,
): Promise<void> {
  const restarted = await startServer({ sqlitePath });
  expect(await deletePlant(restarted.baseUrl, token, storedId)).toStrictEqual({
    status: 204,
    body: undefined,
  });
  expect(
    await postRaw(restarted.baseUrl, token, `{"id": ${newId}, "name": "after"}`),
  ).toStrictEqual({ status: 200, body: { name: 'after' } });
}

afterEach(cleanupChildren);

describe('a plant created right before the process is killed', () => {
  it.each<[string, ChildEnv]>([
    ['SQLITE_SYNCHRONOUS unset (FULL)', { SQLITE_SYNCHRONOUS: undefined }],
    ['SQLITE_SYNCHRONOUS=NORMAL', { SQLITE_SYNCHRONOUS: 'NORMAL' }],
  ])('is still there after SIGKILL and a restart, with %s', async (_label, env) => {
    const sqlitePath = tempSqlitePath();
    const token = await createToken(sqlitePath, 'e2e');
    const first = await startServer({ sqlitePath, env });
    const created = await postRaw(first.baseUrl, token, '{"id": 42, "name": "Monstera deliciosa"}');
    expect(created).toStrictEqual({ status: 200, body: { name: 'Monstera deliciosa' } });

    await first.kill();
    expect(first.process.signalCode).toBe('SIGKILL');
    const wal = `${sqlitePath}-wal`;
    expect(fs.statSync(wal).size).toBeGreaterThan(0);
    const second = await startServer({ sqlitePath, env });
    // The start copied the WAL the kill left into the database file, synced, and emptied it.
    expect(fs.statSync(wal).size).toBe(0);
    const copy = `${sqlitePath}.copy`;
    fs.copyFileSync(sqlitePath, copy);
    expect(storedIds(copy)).toEqual(new Set([42]));

    expect(await deletePlant(second.baseUrl, token, '42')).toStrictEqual({
      status: 204,
      body: undefined,
    });
    expect(await deletePlant(second.baseUrl, token, '42')).toStrictEqual({
      status: 404,
      body: { error: 404, message: 'No plant has the id 42.' },
    });
  });

  it('keeps the exact id 9223372036854775807 sent as raw JSON text across SIGKILL and a restart', async () => {
    const sqlitePath = tempSqlitePath();
    const token = await createToken(sqlitePath, 'e2e');
    const first = await startServer({ sqlitePath });
    const created = await postRaw(
      first.baseUrl,
      token,
      '{"id": 9223372036854775807, "name": "Ficus lyrata"}',
    );
    expect(created).toStrictEqual({ status: 200, body: { name: 'Ficus lyrata' } });

    await first.kill();
    const second = await startServer({ sqlitePath });

    // A neighbour answers 404, so the stored id was not rounded to a double on the way.
    expect(await deletePlant(second.baseUrl, token, '9223372036854775806')).toStrictEqual({
      status: 404,
      body: { error: 404, message: 'No plant has the id 9223372036854775806.' },
    });
    expect(await deletePlant(second.baseUrl, token, '9223372036854775807')).toStrictEqual({
      status: 204,
      body: undefined,
    });
  });

  it('answers 409 for the same id after the restart, so the kill lost nothing', async () => {
    const sqlitePath = tempSqlitePath();
    const token = await createToken(sqlitePath, 'e2e');
    const first = await startServer({ sqlitePath });
    expect(
      (await postRaw(first.baseUrl, token, '{"id": -9223372036854775808, "name": "Ficus"}')).status,
    ).toBe(200);

    await first.kill();
    const second = await startServer({ sqlitePath });

    expect(
      await postRaw(second.baseUrl, token, '{"id": -9223372036854775808, "name": "Ficus"}'),
    ).toStrictEqual({
      status: 409,
      body: { error: 409, message: 'A plant with the id -9223372036854775808 already exists.' },
    });
  });
});

describe('concurrent requests for one id', () => {
  const CONCURRENCY = 50;

  it('answer exactly one 200 and 49 409s to creates, then exactly one 204 and 49 404s to deletes', async () => {
    const sqlitePath = tempSqlitePath();
    const token = await createToken(sqlitePath, 'e2e');
    const server = await startServer({ sqlitePath });
    const body = '{"id": 9007199254740993, "name": "Monstera deliciosa"}';

    const creates = await Promise.all(
      Array.from({ length: CONCURRENCY }, () => postRaw(server.baseUrl, token, body)),
    );

    expect(countStatuses(creates)).toStrictEqual({ 200: 1, 409: CONCURRENCY - 1 });
    for (const answer of creates.filter(({ status }) => status === 409)) {
      expect(answer.body).toStrictEqual({
        error: 409,
        message: 'A plant with the id 9007199254740993 already exists.',
      });
    }

    const deletes = await Promise.all(
      Array.from({ length: CONCURRENCY }, () =>
        deletePlant(server.baseUrl, token, '9007199254740993'),
      ),
    );

    expect(countStatuses(deletes)).toStrictEqual({ 204: 1, 404: CONCURRENCY - 1 });
    for (const answer of deletes.filter(({ status }) => status === 404)) {
      expect(answer.body).toStrictEqual({
        error: 404,
        message: 'No plant has the id 9007199254740993.',
      });
    }
    expect(server.process.exitCode).toBeNull();
  });
});

describe('a server whose WAL sync fails (SQLITE_SYNCHRONOUS unset: FULL)', () => {
  it('answers that write 503, stops with exit code 1, and a restart writes again', async () => {
    const { sqlitePath, failing, token, server } = await startOnFailingDisk({
      shutdownTimeoutMs: 2000,
    });
    expect(await postRaw(server.baseUrl, token, '{"id": 1, "name": "before"}')).toStrictEqual({
      status: 200,
      body: { name: 'before' },
    });

    fs.writeFileSync(failing, '');
    const unavailable = {
      status: 503,
      body: { error: 503, message: 'The store is unavailable; try again shortly.' },
    };
    expect(await postRaw(server.baseUrl, token, '{"id": 2, "name": "during"}')).toStrictEqual(
      unavailable,
    );

    expect(await server.ended(20_000)).toBe(1);
    const fatal = storeStops(server);
    expect(fatal).toHaveLength(1);
    expect(fatal[0]).toMatchObject({ level: 60, err: { message: expect.any(String) } });
    expect(JSON.stringify(fatal[0])).toContain('EIO');
    // The store was not closed: the WAL is left for the restart to recover from.
    expect(fs.statSync(`${sqlitePath}-wal`).size).toBeGreaterThan(0);

    fs.rmSync(failing);
    await expectWritesAfterRestart(sqlitePath, token, '1', 3);
  });
});

describe('a server whose sync of the database file fails in a WAL checkpoint (FULL)', () => {
  it('stops writing before the WAL can restart, exits 1, and the file holds every write answered 200', async () => {
    // Only the database file's syncs fail: the WAL's, each commit's, succeed.
    const { sqlitePath, failing, token, server } = await startOnFailingDisk({
      shutdownTimeoutMs: 2000,
      ofFilesEndingWith: '.sqlite',
      failingFromStart: true,
    });

    // The checkpoint thread's first pass starts after 16,000 writes; the clients go on until the
    // store stops (at most 40,000 plants).
    const { statuses, answered, refused, unanswered } = await createInOrder(server, token, 40000);
    expect(answered.length).toBeGreaterThanOrEqual(16000);
    // The store stops as soon as the thread reports the failure, between commits or during one:
    // the writes queued then are refused, and those sent after it cut off by the exit.
    expect(refused.length + unanswered.length).toBeGreaterThan(0);
    expect(answered.length + refused.length).toBe(statuses.size);

    expect(await server.ended(20_000)).toBe(1);
    const fatal = storeStops(server);
    expect(fatal).toHaveLength(1);
    expect(JSON.stringify(fatal[0])).toContain('EIO');

    // The file, opened as the restart will open it (recovering from the WAL), holds every plant
    // answered 200 and none answered 503; a request cut off by the exit may be either.
    const stored = storedIds(sqlitePath);
    expect(answered.filter((id) => !stored.has(id))).toEqual([]);
    expect(refused.filter((id) => stored.has(id))).toEqual([]);
    expect(stored.size).toBeLessThanOrEqual(answered.length + unanswered.length);

    fs.rmSync(failing);
    await expectWritesAfterRestart(sqlitePath, token, String(answered.at(-1)), 0);
  }, 120_000);

  it('stops as soon as the thread reports the failed sync, though no write follows it', async () => {
    const { sqlitePath, token, server } = await startOnFailingDisk({
      shutdownTimeoutMs: 2000,
      ofFilesEndingWith: '.sqlite',
      failingFromStart: true,
    });

    // The first checkpoint's 16,000 writes, then no more: the commit of the last starts the
    // thread's pass, which fails its sync while the store is idle.
    const { answered } = await createInOrder(server, token, 16000);
    expect(answered.length).toBe(16000);
    expect(await server.ended(20_000)).toBe(1);
    const fatal = storeStops(server);
    expect(fatal).toHaveLength(1);
    expect(JSON.stringify(fatal[0])).toContain('EIO');
    expect(storedIds(sqlitePath).size).toBe(16000);
  }, 120_000);
});

describe('a server whose WAL sync fails while a signal waits for a write in flight', () => {
  it('answers that write 503 and exits with code 1, not 0', async () => {
    const { failing, token, server } = await startOnFailingDisk({
      shutdownTimeoutMs: 5000,
    });
    const { hostname, port } = new URL(server.baseUrl);
    const body = '{"id": 1, "name": "drained"}';

    // A POST whose body has not arrived is in flight: the drain after SIGTERM waits for it. Its
    // 100 Continue says the server has read and accepted its head.
    const socket = net.connect(Number(port), hostname);
    let received = '';
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
    const closed = new Promise((resolve) => socket.once('close', resolve));
    socket.write(
      `POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n` +
        'Expect: 100-continue\r\n\r\n',
    );
    await waitFor('the 100 Continue', () => received.startsWith('HTTP/1.1 100 Continue\r\n\r\n'));
    received = '';
    server.process.kill('SIGTERM');
    await waitFor('the drain', () =>
      logLinesOf(server).some(
        (line) => line['message'] === 'stopping: draining in-flight requests',
      ),
    );
    fs.writeFileSync(failing, '');
    socket.end(body);
    await closed;

    expect(received).toMatch(/^HTTP\/1\.1 503 /);
    expect(await server.ended(20_000)).toBe(1);
    expect(storeStops(server)).toHaveLength(1);
  });
});

describe('a server whose disk stops answering (FULL, SQLITE_SYNC_TIMEOUT_MS)', () => {
  const unavailable = {
    status: 503,
    body: { error: 503, message: 'The store is unavailable; try again shortly.' },
  };

  it('answers the write whose WAL sync is overdue 503, and ends itself while the disk still hangs', async () => {
    const { sqlitePath, flag, token, server } = await startOnDisk(hangingDiskEnv, {
      SQLITE_SYNC_TIMEOUT_MS: '1000',
      SHUTDOWN_TIMEOUT_MS: '2000',
    });
    expect(await postRaw(server.baseUrl, token, '{"id": 1, "name": "before"}')).toStrictEqual({
      status: 200,
      body: { name: 'before' },
    });

    fs.writeFileSync(flag, ''); // every fdatasync from now on waits until the flag is gone
    const sent = performance.now();
    expect(await postRaw(server.baseUrl, token, '{"id": 2, "name": "during"}')).toStrictEqual(
      unavailable,
    );
    // Not before the deadline (less the timer's millisecond rounding): a slow sync is waited for
    // (the test below).
    expect(performance.now() - sent).toBeGreaterThanOrEqual(990);

    // The sync still holds its thread, which a normal exit would wait for: the process drains,
    // then ends with SIGKILL.
    expect(await server.ended(15_000)).toBe('SIGKILL');
    expect(fs.existsSync(flag)).toBe(true);
    const fatal = storeStops(server);
    expect(fatal).toHaveLength(1);
    expect(JSON.stringify(fatal[0])).toContain(
      'did not return within 1000 ms (SQLITE_SYNC_TIMEOUT_MS)',
    );
    // The store was not closed: the WAL is left for the restart to recover from.
    expect(fs.statSync(`${sqlitePath}-wal`).size).toBeGreaterThan(0);

    answerHungDisk(flag);
    await expectWritesAfterRestart(sqlitePath, token, '1', 3);
  });

  it('waits for a sync that returns within the deadline, and goes on serving', async () => {
    const { flag, token, server } = await startOnDisk(hangingDiskEnv, {
      SQLITE_SYNC_TIMEOUT_MS: '5000',
    });
    fs.writeFileSync(flag, '');
    let answered = false;
    const during = postRaw(server.baseUrl, token, '{"id": 1, "name": "during"}').finally(
      () => (answered = true),
    );
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(answered).toBe(false);

    answerHungDisk(flag);
    expect(await during).toStrictEqual({ status: 200, body: { name: 'during' } });
    expect(await postRaw(server.baseUrl, token, '{"id": 2, "name": "after"}')).toStrictEqual({
      status: 200,
      body: { name: 'after' },
    });
    expect(storeStops(server)).toEqual([]);
    expect(server.process.exitCode).toBeNull();
  });

  it('ends on SIGTERM though a checkpoint pass is stuck and no write comes', async () => {
    // Only the database file's syncs hang: the checkpoint thread's first pass, after its 16,000
    // writes, waits in its sync; the WAL's syncs go on, so nothing stops the store.
    const { flag, token, server } = await startOnDisk(
      hangingDiskEnv,
      { SQLITE_SYNC_TIMEOUT_MS: '1000', SHUTDOWN_TIMEOUT_MS: '2000' },
      '.sqlite',
    );
    const writes = DEFAULT_CHECKPOINT_EVERY_WRITES + 100;
    expect((await createInOrder(server, token, writes)).answered.length).toBe(writes);

    server.process.kill('SIGTERM');

    // The close waits for the pass up to the deadline, then leaves the store as a stop does.
    expect(await server.ended(15_000)).toBe('SIGKILL');
    expect(logLinesOf(server).some((line) => line['message'] === 'stopped')).toBe(true);
    expect(storeStops(server)).toEqual([]);
    answerHungDisk(flag);
  }, 120_000);

  it("ends the primary under WORKERS whose development token's sync is overdue", async () => {
    // The primary keeps a store only to create the development token once a worker listens; the
    // token's commit is the first sync, and it sticks.
    const sqlitePath = tempSqlitePath();
    const flag = `${sqlitePath}.disk-flag`;
    const env = hangingDiskEnv(flag);
    fs.writeFileSync(flag, '');

    const result = await runServerToExit({
      sqlitePath,
      env: { ...env, WORKERS: '2', SQLITE_SYNC_TIMEOUT_MS: '1000' },
      timeoutMs: 20_000,
    });

    expect(result.signal).toBe('SIGKILL');
    expect(result.stderr).toContain(
      'The plant store failed to start: The store is unavailable. (The sync of the WAL did not ' +
        'return within 1000 ms (SQLITE_SYNC_TIMEOUT_MS): the disk counts as failed.)\n',
    );
    // The development token's commit came before its sync: it may be kept, and a start makes one
    // only while no token is active, so the operator is told which to revoke.
    expect(result.stderr).toMatch(
      /\nToken [0-9a-f]{12} may have been stored before the store failed, with its secret never shown: if npm run token -- list shows it, revoke it \(npm run token -- revoke [0-9a-f]{12}\)\.\n/,
    );
  });

  it('ends itself without waiting for a checkpoint whose sync of the database file hangs too', async () => {
    // The database file's syncs hang from the start: the checkpoint thread's first pass, after
    // its 16,000 writes, waits in its sync while the commits go on; then every sync hangs.
    const { sqlitePath, flag, token, server } = await startOnDisk(
      hangingDiskEnv,
      { SQLITE_SYNC_TIMEOUT_MS: '1000', SHUTDOWN_TIMEOUT_MS: '2000' },
      '.sqlite',
    );
    const writes = DEFAULT_CHECKPOINT_EVERY_WRITES + 100;
    const { answered } = await createInOrder(server, token, writes);
    expect(answered.length).toBe(writes);

    fs.writeFileSync(flag, '');
    expect(await postRaw(server.baseUrl, token, '{"id": 0, "name": "during"}')).toStrictEqual(
      unavailable,
    );
    expect(await server.ended(15_000)).toBe('SIGKILL');
    expect(storeStops(server)).toHaveLength(1);
    answerHungDisk(flag);
    const stored = storedIds(sqlitePath);
    expect(answered.filter((id) => !stored.has(id))).toEqual([]);
  }, 120_000);
});
