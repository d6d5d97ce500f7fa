import path from 'node:path';
import { openFifo, type Fifo } from '../support/fifo';
import {
  cleanupChildren,
  createToken,
  freePort,
  startServer,
  tempSqlitePath,
} from '../support/server-process';

let fifo: Fifo | undefined;

afterEach(async () => {
  await cleanupChildren();
  fifo?.close();
  fifo = undefined;
});

/** How long the load runs while nothing reads standard output. */
const UNREAD_MS = 1_500;
/** How long it then runs while standard output is read, slower than the log is written. */
const SLOW_READ_MS = 2_000;
/** About 27 KB/s: the workers log 100 KB/s or more under this load, even on a busy 2-core host. */
const SLOW_READ = { bytesPerTick: 4096, tickMs: 150 };
/** Requests in flight at once. */
const CONCURRENCY = 32;

/** Creates plants until `deadline`; resolves with the X-Request-Id of every 200. */
async function createPlantsUntil(
  server: { baseUrl: string },
  token: string,
  deadline: number,
  concurrency = CONCURRENCY,
): Promise<string[]> {
  const ids: string[] = [];
  let next = 1;
  const loop = async () => {
    while (Date.now() < deadline) {
      const id = next++;
      // The longest request id kept (128 characters) makes a line of about 400 bytes.
      const reqId = `${String(id).padStart(8, '0')}-${'r'.repeat(119)}`;
      const response = await fetch(`${server.baseUrl}/plants`, {
        method: 'POST',
        headers: {
          Authorization: `Bearer ${token}`,
          'Content-Type': 'application/json',
          'X-Request-Id': reqId,
        },
        body: `{"id":${id},"name":"p"}`,
        signal: AbortSignal.timeout(10_000),
      });
      await response.arrayBuffer();
      expect(response.status).toBe(200);
      ids.push(reqId);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, loop));
  return ids;
}

/**
 * Requests with a long path in flight at once, and the pause after each: a few dozen lines of 4 KB
 * a second. More would pile up megabytes of log lines while the pipe is read slowly, more than the
 * exit writes within its 5 s (a full pipe makes each process wait 100 ms before it writes again).
 */
const LONG_PATH_CONCURRENCY = 2;
const LONG_PATH_PAUSE_MS = 50;

/** Every 400 answered to a DELETE whose path is kilobytes long, by its X-Request-Id. */
async function requestLongPathsUntil(
  server: { baseUrl: string },
  token: string,
  deadline: number,
): Promise<Map<string, string>> {
  const paths = new Map<string, string>();
  let next = 1;
  const loop = async () => {
    while (Date.now() < deadline) {
      const n = next++;
      // 4.5 to 12.5 KB, within the server's 16 KiB of headers: a line longer than PIPE_BUF.
      const path = `/plants/${String(n).padStart(8, '0')}${'x'.repeat(4500 + ((n * 997) % 8000))}`;
      const reqId = `long-${n}`;
      const response = await fetch(`${server.baseUrl}${path}`, {
        method: 'DELETE',
        headers: { Authorization: `Bearer ${token}`, 'X-Request-Id': reqId },
        signal: AbortSignal.timeout(10_000),
      });
      await response.arrayBuffer();
      expect(response.status).toBe(400);
      paths.set(reqId, path);
      await new Promise((resolve) => setTimeout(resolve, LONG_PATH_PAUSE_MS));
    }
  };
  await Promise.all(Array.from({ length: LONG_PATH_CONCURRENCY }, loop));
  return paths;
}

/**
 * Serves WORKERS=2 with standard output a FIFO and runs `load` while nothing reads it (the pipe,
 * 64 KiB, fills at once), then while a reader slower than the writers does (a log shipper that
 * falls behind): every process's writes wait on the full pipe and go in as it makes room. Resolves
 * with `load`'s result and every line written, once the server has stopped, after checking that
 * each is a whole JSON line.
 */
async function logUnderLoad<T>(
  load: (server: { baseUrl: string }, token: string, deadline: number) => Promise<T>,
): Promise<{ result: T; lines: string[]; entries: Record<string, unknown>[] }> {
  const sqlitePath = tempSqlitePath();
  fifo = openFifo(path.dirname(sqlitePath));
  const token = await createToken(sqlitePath, 'load');
  const port = String(await freePort());
  const server = await startServer({
    sqlitePath,
    env: { PORT: port, WORKERS: '2' },
    stdoutFd: fifo.writeFd,
  });

  const deadline = Date.now() + UNREAD_MS + SLOW_READ_MS;
  const loading = load(server, token, deadline);
  await new Promise((resolve) => setTimeout(resolve, UNREAD_MS));
  const reading = fifo.startReading(SLOW_READ);
  const result = await loading;
  reading.fullSpeed();
  expect(await server.stop('SIGTERM')).toBe(0);
  fifo.closeWriter();
  const output = (await reading.ended).toString('utf8');

  expect(output.endsWith('\n')).toBe(true);
  const lines = output.slice(0, -1).split('\n');
  const entries: Record<string, unknown>[] = [];
  const invalid: string[] = [];
  for (const line of lines) {
    try {
      entries.push(JSON.parse(line) as Record<string, unknown>);
    } catch {
      invalid.push(line.length > 300 ? `${line.slice(0, 300)}...` : line);
    }
  }
  expect({
    lines: lines.length,
    invalid: invalid.length,
    firstInvalid: invalid.slice(0, 2),
  }).toEqual({ lines: lines.length, invalid: 0, firstInvalid: [] });
  return { result, lines, entries };
}

/** The request lines of `entries` whose operation is `operationId`. */
function requestLinesOf(entries: Record<string, unknown>[], operationId: string) {
  return entries.filter(
    (entry) => entry['message'] === 'request' && entry['operationId'] === operationId,
  );
}

describe('WORKERS=2 with standard output a pipe (a container runtime collecting the log)', () => {
  it('writes only whole JSON lines, however full the pipe, and loses none', async () => {
    const { result: reqIds, entries } = await logUnderLoad(createPlantsUntil);
    // Every request answered has exactly one line: none was lost or written twice.
    expect(reqIds.length).toBeGreaterThan(200);
    expect(
      requestLinesOf(entries, 'createPlant')
        .map((entry) => entry['reqId'])
        .sort(),
    ).toEqual([...reqIds].sort());
  });

  it('cuts a line longer than PIPE_BUF to fit, so that it too is written whole', async () => {
    const { result, lines, entries } = await logUnderLoad(async (server, token, deadline) => {
      const [reqIds, paths] = await Promise.all([
        createPlantsUntil(server, token, deadline, CONCURRENCY / 2),
        requestLongPathsUntil(server, token, deadline),
      ]);
      return { reqIds, paths };
    });
    const longest = Math.max(...lines.map((line) => Buffer.byteLength(line) + 1));
    expect(longest).toBeLessThanOrEqual(4096);
    expect(result.paths.size).toBeGreaterThan(30);
    const longLines = requestLinesOf(entries, 'deletePlant');
    expect(longLines.map((entry) => entry['reqId']).sort()).toEqual(
      [...result.paths.keys()].sort(),
    );
    for (const entry of longLines) {
      const logged = (entry['req'] as { path: string }).path;
      expect(entry['truncated']).toBe(true);
      expect(logged.endsWith('…')).toBe(true);
      expect(result.paths.get(entry['reqId'] as string)!.startsWith(logged.slice(0, -1))).toBe(
        true,
      );
    }
    expect(
      requestLinesOf(entries, 'createPlant')
        .map((entry) => entry['reqId'])
        .sort(),
    ).toEqual([...result.reqIds].sort());
  });
});
