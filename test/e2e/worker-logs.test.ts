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

/** How long the load runs while nothing reads standard output: the pipe (64 KiB) fills at once. */
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
  await Promise.all(Array.from({ length: CONCURRENCY }, loop));
  return ids;
}

describe('WORKERS=2 with standard output a pipe (a container runtime collecting the log)', () => {
  it('writes only whole JSON lines, however full the pipe, and loses none', async () => {
    const sqlitePath = tempSqlitePath();
    fifo = openFifo(path.dirname(sqlitePath));
    const token = await createToken(sqlitePath, 'load');
    const port = String(await freePort());
    const server = await startServer({
      sqlitePath,
      env: { PORT: port, WORKERS: '2' },
      stdoutFd: fifo.writeFd,
    });

    // Nothing reads the pipe at first, then a reader slower than the writers (a log shipper that
    // falls behind): every process's writes wait on the full pipe and go in as it makes room.
    const deadline = Date.now() + UNREAD_MS + SLOW_READ_MS;
    const load = createPlantsUntil(server, token, deadline);
    await new Promise((resolve) => setTimeout(resolve, UNREAD_MS));
    const reading = fifo.startReading(SLOW_READ);
    const reqIds = await load;
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
    // Every request answered has exactly one line: none was lost or written twice.
    const requestLines = entries.filter(
      (entry) => entry['message'] === 'request' && entry['operationId'] === 'createPlant',
    );
    expect(reqIds.length).toBeGreaterThan(200);
    expect(requestLines.map((entry) => entry['reqId']).sort()).toEqual([...reqIds].sort());
  });
});
