import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { parseConfig } from '../../src/config';
import { createLogger } from '../../src/logger';
import { connectionCounts } from '../../src/http/connections';
import { createHttpServer } from '../../src/server';
import { connect, nonReadingClient, sleep } from '../reliability/support/http';
import { readThrottled } from '../support/throttled-read';

/**
 * INACTIVITY_TIMEOUT_MS on one answer written in one piece, larger than the connection's buffers:
 * the server sees it move only as the kernel takes more of it (test/reliability/resource-limits
 * has the server process, pipelined answers, and a client that reads nothing).
 */

const ANSWER = Buffer.alloc(32 * 1024 * 1024, 0x61);
const SILENT = createLogger({ level: 'silent' });

let server: http.Server;
let port: number;

beforeEach(async () => {
  const app = express();
  app.get('/large', (_req, res) => {
    res.type('text/plain').send(ANSWER);
  });
  server = createHttpServer(app, { ...parseConfig({}).http, inactivityTimeoutMs: 1000 }, SILENT);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});

afterEach(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

/** A connection that asks for the large answer and reads nothing until told to. */
const ask = () =>
  nonReadingClient({ host: '127.0.0.1', port }, 'GET /large HTTP/1.1\r\nHost: x\r\n\r\n');

it('keeps a connection while its one answer moves, though it takes more than twice INACTIVITY_TIMEOUT_MS=1000 to go', async () => {
  const client = await ask();
  try {
    // About 8 MB a second: 400 KB each 50 ms, paused in between; 32 MB take some 4 s, in one write.
    const started = performance.now();
    let received = 0;
    const stop = readThrottled(client.socket, 400_000, 50, (chunk) => (received += chunk.length));
    try {
      while (
        received < ANSWER.length &&
        !client.isClosed() &&
        performance.now() - started < 15_000
      ) {
        await sleep(20);
      }
    } finally {
      stop();
    }
    const tookMs = performance.now() - started;

    expect({ whole: received > ANSWER.length, closed: client.isClosed() }).toEqual({
      whole: true,
      closed: false,
    });
    // The premise: its one write took more than twice the time-out to go.
    expect(tookMs).toBeGreaterThan(2000);
    expect(connectionCounts(server).timedOut).toBe(0);
  } finally {
    client.socket.destroy();
  }
}, 30_000);

it('closes the connection once its answer stops moving for INACTIVITY_TIMEOUT_MS=1000', async () => {
  const client = await ask();
  try {
    const started = performance.now();
    // Until the server has closed it and seen it go: the socket's 'close', which takes it off the
    // open connections, comes later in the turn of the event loop than the sweep that closed it.
    const closed = () => {
      const counts = connectionCounts(server);
      return counts.timedOut > 0 && counts.open === 0;
    };
    while (!closed() && performance.now() - started < 5000) await sleep(20);
    const closedAfterMs = performance.now() - started;

    expect(connectionCounts(server)).toMatchObject({ timedOut: 1, open: 0 });
    expect(closedAfterMs).toBeGreaterThanOrEqual(900);
    expect(closedAfterMs).toBeLessThan(3000);
  } finally {
    client.socket.destroy();
  }
}, 30_000);

it('leaves a request whose body stops arriving to REQUEST_TIMEOUT_MS, which answers it 408', async () => {
  server.close();
  const app = express();
  app.post('/upload', (req, res) => {
    req.resume();
    req.on('end', () => res.end('whole'));
  });
  server = createHttpServer(
    app,
    {
      ...parseConfig({}).http,
      inactivityTimeoutMs: 1000,
      headersTimeoutMs: 1000,
      requestTimeoutMs: 3000,
    },
    SILENT,
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
  const socket = await connect({ host: '127.0.0.1', port });
  socket.on('error', () => undefined);
  const chunks: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => chunks.push(chunk));
  const started = performance.now();
  const closedAfterMs = new Promise<number>((resolve) =>
    socket.once('close', () => resolve(performance.now() - started)),
  );
  socket.write('POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789');

  let giveUp: NodeJS.Timeout | undefined;
  const afterMs = await Promise.race([
    closedAfterMs,
    new Promise<undefined>((resolve) => (giveUp = setTimeout(() => resolve(undefined), 8000))),
  ]);
  clearTimeout(giveUp);

  expect(Buffer.concat(chunks).toString('latin1')).toMatch(/^HTTP\/1\.1 408 /);
  expect(afterMs).toBeGreaterThanOrEqual(2900);
  expect(connectionCounts(server).timedOut).toBe(0);
}, 30_000);
