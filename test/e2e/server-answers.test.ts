import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { targetOf } from '../reliability/support/http';
import { rawCreate, rawCreateParts, responsesIn } from '../reliability/support/raw';
import { linesOf, requestLineOf, waitFor } from '../support/log-lines';
import { seriesValue } from '../support/metrics-text';
import {
  answerHungDisk,
  callApi,
  cleanupChildren,
  hangingDiskEnv,
  startWithToken,
  tempSqlitePath,
  type RunningServer,
} from '../support/server-process';
import { readSqlitePlantIds } from '../support/stored-plants';
import { serverHoldsConnection, untilServerHasRead } from '../support/tcp-connections';

/**
 * The answers the HTTP server writes itself, to what it cannot parse (src/http/client-errors.ts),
 * on a connection that also carries requests the app answers.
 */

let server: RunningServer;
let token: string;
let port: number;
/** The server's SQLite file, which a test reads through a read-only connection of its own. */
let sqlitePath: string;

beforeAll(async () => {
  sqlitePath = tempSqlitePath();
  ({ server, token } = await startWithToken({
    sqlitePath,
    env: { HEADERS_TIMEOUT_MS: '1000', REQUEST_TIMEOUT_MS: '2000' },
  }));
  port = Number(new URL(server.baseUrl).port);
});
afterAll(cleanupChildren);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** What one connection received, and whether the server closed it. */
interface Conversation {
  readonly data: Buffer;
  readonly closedByServer: boolean;
}

/**
 * Writes `request` on a new connection, then each of `more` after `gapMs`, reading nothing until
 * then when `readLate`; collects everything the server sends until it closes the connection, or
 * for at most `maxMs`.
 */
function converse(
  request: string,
  {
    more = [],
    gapMs = 20,
    readLate = false,
    maxMs = 10_000,
    to = port,
    halfClose = false,
  }: ConverseOptions = {},
): Promise<Conversation> {
  return new Promise((resolve) => {
    const socket = net.connect(to, '127.0.0.1');
    const chunks: Buffer[] = [];
    let closedByServer = false;
    const deadline = setTimeout(() => socket.destroy(), maxMs);
    if (readLate) socket.pause();
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', () => undefined);
    socket.on('end', () => (closedByServer = true));
    socket.on('close', () => {
      clearTimeout(deadline);
      resolve({ data: Buffer.concat(chunks), closedByServer });
    });
    socket.once('connect', async () => {
      socket.write(request);
      for (const chunk of more) {
        await sleep(gapMs);
        socket.write(chunk);
      }
      if (halfClose) socket.end();
      socket.resume();
    });
  });
}

interface ConverseOptions {
  readonly more?: readonly string[];
  readonly gapMs?: number;
  readonly readLate?: boolean;
  readonly maxMs?: number;
  /** The port to connect to: the shared server's by default. */
  readonly to?: number;
  /** Whether to end the client's side of the connection once everything is written. */
  readonly halfClose?: boolean;
}

/**
 * Sends `first` on a new connection to `to` whose client never closes its side, and resolves once
 * the server has answered; `chunks` gathers what the server sends.
 */
async function answeredConnection(
  to: number,
  first: string,
): Promise<{ socket: net.Socket; chunks: Buffer[] }> {
  const socket = net.connect({ port: to, host: '127.0.0.1', allowHalfOpen: true });
  socket.on('error', () => undefined);
  const chunks: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => chunks.push(chunk));
  const answered = new Promise((resolve) => socket.once('data', resolve));
  await new Promise((resolve) => socket.once('connect', resolve));
  socket.write(first);
  await answered;
  return { socket, chunks };
}

/**
 * Starts a server of its own with `env`, sends `request` on a connection whose client keeps its
 * side open, and once the server has answered it stops the server: the statuses answered, the
 * server's exit code and how long its shutdown took.
 */
async function stopAfterOwnAnswer(
  env: Readonly<Record<string, string>>,
  request: string,
): Promise<{ statuses: number[]; exitCode: number | null; stopMs: number }> {
  const { server: draining } = await startWithToken({ env });
  const { socket, chunks } = await answeredConnection(
    Number(new URL(draining.baseUrl).port),
    request,
  );
  const statuses = responsesIn(Buffer.concat(chunks)).map((answer) => answer.status);
  const stopping = performance.now();
  const exitCode = await draining.stop();
  const stopMs = performance.now() - stopping;
  socket.destroy();
  return { statuses, exitCode, stopMs };
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

const UNPARSEABLE = { error: 400, message: 'The request could not be parsed as HTTP/1.1.' };

/** A POST whose body announces 40 bytes and stops after five: it never arrives whole. */
const cutShortPost = (target: string, headers = '') =>
  `POST ${target} HTTP/1.1\r\nHost: x\r\n${headers}Content-Type: application/json\r\n` +
  'Content-Length: 40\r\n\r\n{"id"';

const createPlant = (id: number, bearer = token) => rawCreate(bearer, id);

describe('a malformed request pipelined after others', () => {
  it('is answered 400 only after the requests before it, which are answered and logged', async () => {
    const { data, closedByServer } = await converse(`${createPlant(4444)}GET / HTTP/9\r\n\r\n`);

    const [created, refused, ...more] = responsesIn(data);
    expect(created?.status).toBe(200);
    expect(JSON.parse(created!.body.toString())).toEqual({ name: 'x' });
    expect(refused?.status).toBe(400);
    expect(refused?.headers['connection']).toBe('close');
    // An HTTP date (RFC 9110 section 5.6.7) of the answer's second.
    expect(refused?.headers['date']).toMatch(
      /^[A-Z][a-z]{2}, \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d GMT$/,
    );
    expect(Math.abs(Date.parse(refused!.headers['date'] as string) - Date.now())).toBeLessThan(
      5_000,
    );
    expect(JSON.parse(refused!.body.toString())).toEqual(UNPARSEABLE);
    expect(more).toEqual([]);
    expect(closedByServer).toBe(true);
    const reqId = created!.headers['x-request-id'] as string;
    expect(await requestLineOf(server, reqId)).toMatchObject({
      operationId: 'createPlant',
      res: { status: 200 },
    });
  });

  it('waits for every response queued before it, whole, while the client reads late and sends more', async () => {
    // Six responses of 1.4 MB each, more than the socket buffers hold while the client reads
    // nothing, so they are still being written when the bytes sent meanwhile make node:http
    // report the parse error again, once for each chunk.
    const asset = 'GET /docs/assets/swagger-ui-bundle.js HTTP/1.1\r\nHost: x\r\n\r\n';
    const { data, closedByServer } = await converse(`${asset.repeat(6)}GET / HTTP/9\r\n\r\n`, {
      readLate: true,
      more: Array.from({ length: 15 }, () => 'more bytes\r\n'),
    });

    const responses = responsesIn(data);
    expect(responses.map((response) => response.status)).toEqual([...Array(6).fill(200), 400]);
    const sizes = new Set(responses.slice(0, 6).map((response) => response.body.length));
    expect([...sizes]).toEqual([expect.any(Number)]);
    expect(responses[0]!.body.length).toBeGreaterThan(1_000_000);
    expect(JSON.parse(responses[6]!.body.toString())).toEqual(UNPARSEABLE);
    expect(closedByServer).toBe(true);
    // Answered once: no listener was added per report of the error.
    expect(server.stderr()).not.toContain('MaxListenersExceededWarning');
  });
});

describe('an answer the server writes itself', () => {
  it.each([
    ['400 to a request that is not HTTP/1.1', 'GET / HTTP/9\r\n\r\n', 400, 'HPE_INVALID_VERSION'],
    [
      '431 to headers over the limit',
      `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Request-Id: mine\r\nX-Big: ${'a'.repeat(17 * 1024)}\r\n\r\n`,
      431,
      'HPE_HEADER_OVERFLOW',
    ],
    [
      '408 to headers that do not arrive in time',
      'GET /healthz HTTP/1.1\r\nHost: x\r\nX-Request-Id: mine\r\nX-Slow: ',
      408,
      'ERR_HTTP_REQUEST_TIMEOUT',
    ],
  ])(
    'carries a new X-Request-Id and gets one log line: %s',
    async (_label, request, status, cause) => {
      const { data } = await converse(request, { maxMs: 5000 });

      const [answer] = responsesIn(data);
      expect(answer?.status).toBe(status);
      // A new id even when the request holds one: it was never parsed.
      const reqId = answer!.headers['x-request-id'] as string;
      expect(reqId).toMatch(UUID);
      expect(await requestLineOf(server, reqId)).toEqual({
        level: 30,
        time: expect.any(String),
        pid: server.process.pid,
        reqId,
        res: { status },
        cause,
        message: 'request',
      });
      expect(linesOf(server, reqId)).toHaveLength(1);
    },
  );

  it('keeps the X-Request-Id of a request whose headers arrived, and logs its method and path: 408 to a body that does not arrive in time', async () => {
    const { data } = await converse(
      cutShortPost(
        '/plants?q=1',
        `X-Request-Id: mine-slow-body\r\nAuthorization: Bearer ${token}\r\n`,
      ),
      { maxMs: 6000 },
    );

    const [answer, ...more] = responsesIn(data);
    expect(answer?.status).toBe(408);
    expect(JSON.parse(answer!.body.toString())).toEqual({
      error: 408,
      message: 'The request took too long to arrive.',
    });
    expect(answer!.headers['x-request-id']).toBe('mine-slow-body');
    expect(more).toEqual([]);
    expect(await requestLineOf(server, 'mine-slow-body')).toEqual({
      level: 30,
      time: expect.any(String),
      pid: server.process.pid,
      reqId: 'mine-slow-body',
      req: { method: 'POST', path: '/plants' },
      res: { status: 408 },
      cause: 'ERR_HTTP_REQUEST_TIMEOUT',
      message: 'request',
    });
    expect(linesOf(server, 'mine-slow-body')).toHaveLength(1);
  });
});

describe('what a client sends after an answer the server writes itself', () => {
  // A server of its own, whose connections close two seconds after the server's own answer.
  let closing: RunningServer;
  let closingToken: string;
  let closingPath: string;
  beforeAll(async () => {
    closingPath = tempSqlitePath();
    ({ server: closing, token: closingToken } = await startWithToken({
      sqlitePath: closingPath,
      env: {
        HEADERS_TIMEOUT_MS: '1000',
        REQUEST_TIMEOUT_MS: '1000',
        KEEP_ALIVE_TIMEOUT_MS: '2000',
      },
    }));
  });

  /** What the server sent on a connection, and whether it let the connection go. */
  interface AfterAnswer {
    readonly data: Buffer;
    readonly released: boolean;
  }

  const closingPort = () => Number(new URL(closing.baseUrl).port);

  /**
   * Sends `first` on a connection whose client never closes its side, and `rest` once the server
   * has answered (then, with `trickle`, a byte every 200 ms); once the server has read `rest`,
   * waits up to 8 s for it to let the connection go (KEEP_ALIVE_TIMEOUT_MS is 2 s here).
   */
  async function sendOnAfterAnswer(
    first: string,
    rest: string,
    { trickle = false } = {},
  ): Promise<AfterAnswer> {
    const { socket, chunks } = await answeredConnection(closingPort(), first);
    socket.write(rest);
    await untilServerHasRead(closing.process.pid!, closingPort(), [socket]);
    const trickling = trickle ? setInterval(() => socket.write(' '), 200) : undefined;
    const released = await letGo(socket);
    clearInterval(trickling);
    socket.destroy();
    return { data: Buffer.concat(chunks), released };
  }

  /** Whether the server lets the connection of `socket` go within 8 s. */
  function letGo(socket: net.Socket): Promise<boolean> {
    return waitFor(
      'the server letting the connection go',
      () => !serverHoldsConnection(closing.process.pid!, closingPort(), socket.localPort!),
      8000,
    ).then(
      () => true,
      () => false,
    );
  }

  const createLate = (id: number) => rawCreateParts(closingToken, id, 'late');

  it('does not store a create whose body arrives whole after its 408, and closes the connection', async () => {
    const { head, body } = createLate(8101);

    const { data, released } = await sendOnAfterAnswer(
      `${head}\r\n${body.slice(0, 5)}`,
      body.slice(5),
    );

    expect(responsesIn(data).map((answer) => answer.status)).toEqual([408]);
    // The server read the rest a second before it let the connection go: time to have stored it.
    expect(readSqlitePlantIds(closingPath)).not.toContain(8101n);
    expect(released).toBe(true);
  });

  it('does not store a create whose headers end after the 408 to them', async () => {
    const { head, body } = createLate(8102);

    const { data, released } = await sendOnAfterAnswer(head, `\r\n${body}`);

    expect(responsesIn(data).map((answer) => answer.status)).toEqual([408]);
    expect(readSqlitePlantIds(closingPath)).not.toContain(8102n);
    expect(released).toBe(true);
  });

  it('does not delete a plant whose DELETE body arrives whole after its 408', async () => {
    const created = await callApi(
      closing,
      closingToken,
      'POST',
      '/plants',
      '{"id": 8103, "name": "kept"}',
    );
    expect(created.status).toBe(200);
    const head =
      `DELETE /plants/8103 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${closingToken}\r\n` +
      'Content-Length: 10\r\n\r\n';

    const { data, released } = await sendOnAfterAnswer(`${head}12345`, '67890');

    expect(responsesIn(data).map((answer) => answer.status)).toEqual([408]);
    expect(readSqlitePlantIds(closingPath)).toContain(8103n);
    expect(released).toBe(true);
  });

  it('serves none of the requests pipelined after a 408 to headers, and reads no further', async () => {
    const { socket, chunks } = await answeredConnection(
      closingPort(),
      'GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ',
    );
    // The slow headers end, and 20,000 requests follow them (about 1 MB).
    const requests = Array.from(
      { length: 20_000 },
      (_, i) => `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Request-Id: after-408-${i}\r\n\r\n`,
    );
    socket.write(`\r\n\r\n${requests.join('')}`);

    // The server stops reading at the first request after its answer: the rest stays unread.
    await expect(
      untilServerHasRead(closing.process.pid!, closingPort(), [socket], 1000),
    ).rejects.toThrow();
    const released = await letGo(socket);
    socket.destroy();
    expect(responsesIn(Buffer.concat(chunks)).map((answer) => answer.status)).toEqual([408]);
    expect(linesOf(closing, 'after-408-0')).toEqual([]);
    expect(released).toBe(true);
  });

  it('reads and drops what follows a 400, then lets the connection go', async () => {
    const { data, released } = await sendOnAfterAnswer('GET / HTTP/9\r\n\r\n', 'more of it');

    expect(responsesIn(data).map((answer) => answer.status)).toEqual([400]);
    expect(released).toBe(true);
  });

  it('does not hold up a shutdown once its answer has left', async () => {
    const { statuses, exitCode, stopMs } = await stopAfterOwnAnswer(
      {
        REQUEST_TIMEOUT_MS: '1000',
        HEADERS_TIMEOUT_MS: '1000',
        KEEP_ALIVE_TIMEOUT_MS: '60000',
        SHUTDOWN_TIMEOUT_MS: '30000',
      },
      'GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ',
    );

    expect(statuses).toEqual([408]);
    expect(exitCode).toBe(0);
    // Far from the 60 s the connection would otherwise be kept, or the 30 s of the deadline.
    expect(stopMs).toBeLessThan(5000);
  });

  it('does not store a create pipelined behind one held in its commit, whose body comes whole after its time-out', async () => {
    // A server of its own whose WAL syncs wait while `flag` exists: the first create is held in
    // its commit while the second's body stops, times out, and then arrives whole; its 408 waits
    // for the first's answer.
    const ownPath = tempSqlitePath();
    const flag = `${ownPath}.disk-flag`;
    const own = await startWithToken({
      sqlitePath: ownPath,
      env: { ...hangingDiskEnv(flag), REQUEST_TIMEOUT_MS: '1000', HEADERS_TIMEOUT_MS: '1000' },
    });
    expect((await callApi(own.server, own.token, 'DELETE', '/plants/9300')).status).toBe(404);
    const socket = net.connect(targetOf(own.server.baseUrl).port, '127.0.0.1');
    socket.on('error', () => undefined);
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    const closed = new Promise((resolve) => socket.once('close', resolve));
    await new Promise((resolve) => socket.once('connect', resolve));
    fs.writeFileSync(flag, '-wal');
    const second = createPlant(9302, own.token);
    const cut = second.indexOf('\r\n\r\n') + 6;
    socket.write(createPlant(9301, own.token) + second.slice(0, cut));
    await waitFor(
      'the first create in the file',
      () => readSqlitePlantIds(ownPath).includes(9301n),
      10_000,
    );
    // Past the second's REQUEST_TIMEOUT_MS and the server's check of it (once a second).
    await sleep(3500);
    await new Promise((resolve) => socket.write(second.slice(cut), resolve));
    answerHungDisk(flag);
    await closed;

    expect(responsesIn(Buffer.concat(chunks)).map((answer) => answer.status)).toEqual([200, 408]);
    expect(readSqlitePlantIds(ownPath)).toEqual([9301n]);
  });

  it('closes the connection of a CONNECT whose client goes on sending after the answer', async () => {
    const { data, released } = await sendOnAfterAnswer(
      'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n',
      'x',
      { trickle: true },
    );

    expect(responsesIn(data).map((answer) => answer.status)).toEqual([405]);
    expect(released).toBe(true);
  });
});

describe('a request the app answered before its body came whole', () => {
  it('gets no second answer when its body does not arrive in time: the connection is closed', async () => {
    const { data, closedByServer } = await converse(cutShortPost('/nowhere'), { maxMs: 6000 });

    expect(responsesIn(data).map((answer) => answer.status)).toEqual([404]);
    expect(closedByServer).toBe(true);
  });
});

describe('a request followed by the end of the client side of the connection (half-close)', () => {
  it('is answered 400 when the end cuts it short', async () => {
    const { data } = await converse(cutShortPost('/plants', `Authorization: Bearer ${token}\r\n`), {
      halfClose: true,
      maxMs: 3000,
    });

    const [answer, ...more] = responsesIn(data);
    expect(answer?.status).toBe(400);
    expect(JSON.parse(answer!.body.toString())).toEqual(UNPARSEABLE);
    expect(more).toEqual([]);
  });
});

describe('an HTTP/1.0 request with a Transfer-Encoding', () => {
  it('is answered, and its connection then closed, whatever it asks (RFC 9112 section 6.1)', async () => {
    const { data, closedByServer } = await converse(
      'GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n' +
        '0\r\n\r\nGET /readyz HTTP/1.1\r\nHost: x\r\n\r\n',
      { maxMs: 3000 },
    );

    const answers = responsesIn(data);
    expect(answers.map((answer) => answer.status)).toEqual([200]);
    expect(answers[0]?.headers['connection']).toBe('close');
    expect(closedByServer).toBe(true);
  });
});

describe('a request that expects 100-continue', () => {
  const expecting = (path: string, headers: string, length: number) =>
    `POST ${path} HTTP/1.1\r\nHost: x\r\n${headers}Content-Type: application/json\r\n` +
    `Expect: 100-continue\r\nContent-Length: ${length}\r\n\r\n`;

  it.each([
    ['without a token', '', 100, 401],
    ['with a body over the limit', 'TOKEN', 5_000_000, 413],
    ['with a media type it refuses', 'TOKEN', 100, 415],
  ])(
    'gets its final answer, without a 100 first, when it is refused before its body: %s',
    async (label, auth, length, status) => {
      const headers = auth === '' ? '' : `Authorization: Bearer ${token}\r\n`;
      const request = expecting('/plants', headers, length);
      const { data, closedByServer } = await converse(
        label.includes('media') ? request.replace('application/json', 'text/plain') : request,
        { maxMs: 3000 },
      );

      expect(responsesIn(data).map((answer) => answer.status)).toEqual([status]);
      expect(closedByServer).toBe(true);
    },
  );

  it.each([
    ['a GET', 'GET /healthz', [100, 200, 200]],
    ['a DELETE', 'DELETE /plants/7300', [100, 404, 200]],
  ])(
    'without a body (%s) gets its 100 at once, and its connection serves the next request',
    async (_label, requestLine, statuses) => {
      const { data } = await converse(
        `${requestLine} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n` +
          'Expect: 100-continue\r\n\r\n',
        { more: ['GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'], gapMs: 200 },
      );

      expect(responsesIn(data).map((answer) => answer.status)).toEqual(statuses);
    },
  );

  it('gets a 100 once it passed the checks before its body, and then its answer', async () => {
    const body = JSON.stringify({ id: 7200, name: 'x' });
    // Connection: close ends the conversation with the answer; maxMs only guards against a hang.
    const { data } = await converse(
      expecting('/plants', `Authorization: Bearer ${token}\r\nConnection: close\r\n`, body.length),
      { more: [body], gapMs: 200 },
    );

    expect(responsesIn(data).map((answer) => answer.status)).toEqual([100, 200]);
  });
});

describe('requests pipelined on one connection', () => {
  it('are processed one at a time, in order: a DELETE behind the POST of its plant finds it', async () => {
    // A server of its own, whose token is used first here: its first check awaits the store, which
    // let the DELETE behind the POST run first when pipelined requests ran side by side.
    const own = await startWithToken();
    const ownPort = Number(new URL(own.server.baseUrl).port);
    const pair = (id: number) => {
      const body = JSON.stringify({ id, name: 'x' });
      const auth = `Authorization: Bearer ${own.token}\r\n`;
      return (
        `POST /plants HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\n` +
        `Content-Length: ${body.length}\r\n\r\n${body}` +
        `DELETE /plants/${id} HTTP/1.1\r\nHost: x\r\n${auth}\r\n`
      );
    };
    const ids = [1, 2, 3, 4, 5];

    const { data } = await converse(
      `${ids.map(pair).join('')}GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`,
      { to: ownPort, maxMs: 3000 },
    );

    expect(responsesIn(data).map((answer) => answer.status)).toEqual([
      ...ids.flatMap(() => [200, 204]),
      200,
    ]);
    for (const id of ids) {
      const again = await callApi(
        own.server,
        own.token,
        'POST',
        '/plants',
        `{"id":${id},"name":"x"}`,
      );
      expect(again.status).toBe(200);
    }
  });

  it('are not processed when their turn comes after the connection was reset, so that the client may send them again', async () => {
    // A server of its own whose WAL syncs wait while `flag` exists, so that the first create's
    // answer comes after the reset however the two processes are scheduled (an answer sent before
    // it would rightly let the next request run).
    const ownPath = tempSqlitePath();
    const flag = `${ownPath}.disk-flag`;
    const own = await startWithToken({ sqlitePath: ownPath, env: hangingDiskEnv(flag) });
    const ids = [9201, 9202, 9203, 9204];
    // Which of them the file holds, read without a request that could store one.
    const stored = () => {
      const inFile = new Set(readSqlitePlantIds(ownPath));
      return ids.filter((id) => inFile.has(BigInt(id)));
    };
    // Its token's first check awaits the store (and records its use): made before the reset, so
    // that the first create reaches the store before the server can learn of it.
    expect((await callApi(own.server, own.token, 'DELETE', '/plants/9200')).status).toBe(404);
    const socket = net.connect(targetOf(own.server.baseUrl).port, '127.0.0.1');
    socket.on('error', () => undefined);
    await new Promise((resolve) => socket.once('connect', resolve));
    fs.writeFileSync(flag, '-wal');
    // The four at once, then a reset: the server reads them together and runs the first, while the
    // others wait for its answer, which can no longer be sent.
    const first = createPlant(ids[0]!, own.token).replace(
      '\r\n',
      '\r\nX-Request-Id: reset-first\r\n',
    );
    socket.write([first, ...ids.slice(1).map((id) => createPlant(id, own.token))].join(''));
    socket.resetAndDestroy();

    // The first is committed and its sync held; once the disk answers, it is answered, and its
    // request is over once its line is logged: a second run now would start right after it.
    await waitFor('the first create in the file', () => stored().includes(ids[0]!), 10_000);
    answerHungDisk(flag);
    await requestLineOf(own.server, 'reset-first', 10_000);
    // A moment in which a create run wrongly after the reset would commit.
    await sleep(500);

    expect(stored()).toEqual([ids[0]]);
  });
});

describe('a body the app does not read', () => {
  /** `count` chunks of one byte: six bytes each on the wire, the dearest body to read per byte. */
  const tinyChunks = (count: number) => '1\r\na\r\n'.repeat(count);
  const chunked = (requestLine: string) =>
    `${requestLine}\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n`;

  it.each([
    ['a GET, which ignores a body', 'GET /healthz HTTP/1.1', 200],
    ['a 404', 'GET /nothing HTTP/1.1', 404],
    ['a 401', 'DELETE /plants/1 HTTP/1.1', 401],
  ])(
    'is read only 64 KiB past the answer, then the server closes its side: %s',
    async (_label, requestLine, status) => {
      // A megabyte of body, whole, then a second request: node:http alone would read all of it,
      // throwing the body away, and answer the second request too.
      const { data, closedByServer } = await converse(
        `${chunked(requestLine)}${tinyChunks(200_000)}0\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n`,
        { maxMs: 3000 },
      );

      expect(responsesIn(data).map((answer) => answer.status)).toEqual([status]);
      expect(closedByServer).toBe(true);
    },
  );

  it('does not hold up the answer to a GET, which is given before the body ends', async () => {
    // The body never ends: a GET that waited for it would get the server's 408.
    const { data } = await converse(`${chunked('GET /healthz HTTP/1.1')}${tinyChunks(10)}`, {
      maxMs: 5000,
    });

    expect(responsesIn(data).map((answer) => answer.status)).toEqual([200]);
  });
});

describe('a body the app leaves unread past what the server reads after the answer', () => {
  const megabyte = Buffer.alloc(1 << 20, 0x61);

  /**
   * A POST of `body` through node:http's client, answered 404 before its body is read; chunked,
   * in pieces of 16 KiB, or with its Content-Length.
   */
  const postUnread = (agent: http.Agent, body: Buffer, { chunked = false } = {}) =>
    new Promise<{
      status?: number | undefined;
      connection?: string | undefined;
      error?: string | undefined;
    }>((resolve) => {
      const request = http.request(
        {
          host: '127.0.0.1',
          port,
          method: 'POST',
          path: '/nowhere',
          agent,
          headers: chunked ? { 'Transfer-Encoding': 'chunked' } : {},
        },
        (response) => {
          response.resume();
          response.on('end', () =>
            resolve({ status: response.statusCode, connection: response.headers.connection }),
          );
        },
      );
      request.on('error', (error: NodeJS.ErrnoException) => resolve({ error: error.code }));
      if (!chunked) {
        request.end(body);
        return;
      }
      let sent = 0;
      const writeRest = () => {
        while (sent < body.length) {
          const piece = body.subarray(sent, sent + 16_384);
          sent += piece.length;
          if (!request.write(piece)) {
            request.once('drain', writeRest);
            return;
          }
        }
        request.end();
      };
      writeRest();
    });

  const getHealth = (agent: http.Agent) =>
    new Promise<{ status?: number | undefined; error?: string | undefined }>((resolve) => {
      const request = http.get({ host: '127.0.0.1', port, path: '/healthz', agent }, (response) => {
        response.resume();
        response.on('end', () => resolve({ status: response.statusCode }));
      });
      request.on('error', (error: NodeJS.ErrnoException) => resolve({ error: error.code }));
    });

  /** What a keep-alive agent of one connection gets for four such POSTs, each followed by a GET. */
  const postsThenGets = async (body: Buffer, options: { chunked?: boolean }) => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const outcomes = [];
    for (let i = 0; i < 4; i += 1) {
      outcomes.push(await postUnread(agent, body, options));
      outcomes.push(await getHealth(agent));
    }
    agent.destroy();
    return outcomes;
  };

  it('is answered Connection: close when its Content-Length says so, so a keep-alive client does not reuse the connection', async () => {
    // Told keep-alive, the agent sent every second request on the connection the server had
    // closed after reading 64 KiB more, and got ECONNRESET.
    expect(await postsThenGets(megabyte, { chunked: false })).toEqual(
      Array(4)
        .fill([{ status: 404, connection: 'close' }, { status: 200 }])
        .flat(),
    );
  });

  it('is answered Connection: close while it still arrives chunked, whose length is not known', async () => {
    // Told keep-alive, the agent sent each GET on the connection the server had closed after
    // reading 64 KiB more of the body, and got ECONNRESET.
    expect(await postsThenGets(megabyte, { chunked: true })).toEqual(
      Array(4)
        .fill([{ status: 404, connection: 'close' }, { status: 200 }])
        .flat(),
    );
  });

  it('keeps the connection when the rest of its body is short enough to be read', async () => {
    const body = 'a'.repeat(20_000);
    const { data } = await converse(
      `POST /nowhere HTTP/1.1\r\nHost: x\r\nContent-Length: ${body.length}\r\n\r\n${body}` +
        'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
      { maxMs: 3000 },
    );

    const answers = responsesIn(data);
    expect(answers.map((answer) => answer.status)).toEqual([404, 200]);
    expect(answers[0]!.headers['connection']).toBe('keep-alive');
  });

  it('is not reset under a client that is still sending it, when the answer closes the connection', async () => {
    // RFC 9112 section 9.6: the server closes its side and goes on reading, so that the client,
    // still sending, can read the answer. node:http destroyed the connection once the answer was
    // written: the kernel then answered what the client still sent with a reset.
    const socket = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    const received: Buffer[] = [];
    let error: string | undefined;
    socket.on('data', (chunk: Buffer) => received.push(chunk));
    socket.on('error', (cause: NodeJS.ErrnoException) => (error ??= cause.code));
    const ended = new Promise((resolve) => socket.once('end', resolve));
    socket.write(
      `POST /nowhere HTTP/1.1\r\nHost: x\r\nConnection: close\r\n` +
        `Content-Length: ${megabyte.length}\r\n\r\n`,
    );
    socket.write(megabyte.subarray(0, 1 << 16));
    await ended;
    // More of the body a little after the server's side has ended, as a client still sending it
    // does; twice, since a reset of the connection shows only at the write after it.
    for (const start of [1 << 16, 1 << 17]) {
      await sleep(50);
      socket.write(megabyte.subarray(start, start + (1 << 16)));
    }
    await sleep(100);
    socket.destroy();

    expect(error).toBeUndefined();
    const answers = responsesIn(Buffer.concat(received));
    expect(answers.map((answer) => [answer.status, answer.headers['connection']])).toEqual([
      [404, 'close'],
    ]);
  });

  it('releases the connection once the body has arrived whole, when the answer closes it', async () => {
    const socket = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    socket.on('error', () => undefined);
    socket.resume();
    const ended = new Promise((resolve) => socket.once('end', resolve));
    socket.write(
      `POST /nowhere HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 30000\r\n\r\n` +
        'a'.repeat(5_000),
    );
    await ended;
    const held = () => serverHoldsConnection(server.process.pid!, port, socket.localPort!);
    const whileArriving = held();
    socket.write('a'.repeat(25_000));
    // Released within moments on an idle machine; up to 3 s on a busy one.
    let afterwards = true;
    for (let waited = 0; afterwards && waited < 3000; waited += 50) {
      await sleep(50);
      afterwards = held();
    }
    socket.destroy();

    expect({ whileArriving, afterwards }).toEqual({ whileArriving: true, afterwards: false });
  });
});

describe('a body over the limit to an operation that reads one', () => {
  const chunkedPost = (chunks: number) =>
    `POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n` +
    'Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n' +
    `${'1\r\na\r\n'.repeat(chunks)}0\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`;
  const tooLarge = { error: 413, message: 'The request body is larger than 65536 bytes.' };

  it('is answered 413 at the limit, read only 64 KiB further, and the connection closed', async () => {
    // 200,000 one-byte chunks, whole, then a second request: read to its end before the 413, the
    // body would leave the connection open for the second request, which would be answered.
    const { data, closedByServer } = await converse(chunkedPost(200_000), { maxMs: 3000 });

    const answers = responsesIn(data);
    expect(answers.map((answer) => answer.status)).toEqual([413]);
    expect(JSON.parse(answers[0]!.body.toString())).toEqual(tooLarge);
    expect(closedByServer).toBe(true);
  });

  it('is answered Connection: close though the rest of the body is short: its length is not known', async () => {
    // 70,000 chunks: the rest after the limit is 27 KB on the wire, which the server reads; told
    // keep-alive, a client whose chunked body went on past 64 KiB more got a reset on its next
    // request (see the agent's test above).
    const { data, closedByServer } = await converse(chunkedPost(70_000), { maxMs: 3000 });

    const answers = responsesIn(data);
    expect(answers.map((answer) => [answer.status, answer.headers['connection']])).toEqual([
      [413, 'close'],
    ]);
    expect(closedByServer).toBe(true);
  });
});

describe('a DELETE sent with a body', () => {
  const deletion = (id: number) =>
    `DELETE /plants/${id} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n` +
    'Transfer-Encoding: chunked\r\n\r\n';
  const post = (id: number) =>
    callApi(server, token, 'POST', '/plants', JSON.stringify({ id, name: 'x' }));
  /** Whether plant `id` is stored: creating it again conflicts. */
  const stored = async (id: number) => (await post(id)).status === 409;

  it.each([
    ['in the same packet as its headers', [] as string[]],
    ['after its headers', ['ZZ\r\n']],
  ])(
    'deletes nothing when the framing of the body breaks %s: the answer is the 400',
    async (_, later) => {
      const id = 7000 + later.length;
      expect((await post(id)).status).toBe(200);

      const { data, closedByServer } = await converse(
        `${deletion(id)}${later.length === 0 ? 'ZZ\r\n' : ''}`,
        { more: later, gapMs: 100 },
      );

      const [answer, ...more] = responsesIn(data);
      expect(answer?.status).toBe(400);
      expect(JSON.parse(answer!.body.toString())).toEqual(UNPARSEABLE);
      expect(more).toEqual([]);
      expect(closedByServer).toBe(true);
      expect(await stored(id)).toBe(true);
    },
  );

  it('answers 413 to a body longer than a read body may be, and deletes nothing', async () => {
    expect((await post(7020)).status).toBe(200);

    const { data } = await converse(`${deletion(7020)}${'1\r\na\r\n'.repeat(70_000)}0\r\n\r\n`, {
      maxMs: 3000,
    });

    const [answer] = responsesIn(data);
    expect(answer?.status).toBe(413);
    expect(JSON.parse(answer!.body.toString())).toEqual({
      error: 413,
      message: 'The request body is larger than 65536 bytes.',
    });
    expect(await stored(7020)).toBe(true);
  });

  it('answers, and deletes, only once the whole body has arrived, which it ignores', async () => {
    expect((await post(7010)).status).toBe(200);
    const socket = net.connect(port, '127.0.0.1');
    const received: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => received.push(chunk));
    const closed = new Promise((resolve) => socket.once('close', resolve));
    await new Promise((resolve) => socket.once('connect', resolve));

    socket.write(
      `DELETE /plants/7010 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n` +
        'Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n5\r\nhello\r\n',
    );
    await sleep(300);
    expect(received).toEqual([]);
    expect(await stored(7010)).toBe(true);
    socket.write('0\r\n\r\n');
    await closed;

    expect(responsesIn(Buffer.concat(received)).map((answer) => answer.status)).toEqual([204]);
    expect(await stored(7010)).toBe(false);
  });
});

describe('header lines past the thousandth', () => {
  const fillers = 'X-Filler: b\r\n'.repeat(1200);

  it.each([
    ['a Content-Encoding: 415', 'Content-Encoding: gzip\r\n', 415],
    ['a second Host: 400', 'Host: elsewhere\r\n', 400],
    ['a second Authorization: 400', 'Authorization: Bearer plnt_other\r\n', 400],
  ])('are read like the first ones, %s', async (_, last, status) => {
    const body = '{"id": 7020, "name": "x"}';
    const { data } = await converse(
      `POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n${fillers}${last}` +
        `Connection: close\r\n\r\n${body}`,
    );

    expect(responsesIn(data).map((answer) => answer.status)).toEqual([status]);
  });
});

describe('a CONNECT request', () => {
  it('is answered 405 with an empty Allow, logged, and its connection closed', async () => {
    const { data, closedByServer } = await converse(
      'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\nX-Request-Id: mine-connect\r\n\r\n',
    );

    const [answer, ...more] = responsesIn(data);
    expect(answer?.status).toBe(405);
    expect(answer!.headers['allow']).toBe('');
    expect(answer!.headers['date']).toBeDefined();
    expect(answer!.headers['x-request-id']).toBe('mine-connect');
    expect(JSON.parse(answer!.body.toString())).toEqual({
      error: 405,
      message: 'CONNECT is not allowed: this service is not a proxy.',
    });
    expect(more).toEqual([]);
    expect(closedByServer).toBe(true);
    expect(await requestLineOf(server, 'mine-connect')).toMatchObject({
      req: { method: 'CONNECT', path: 'example.com:443' },
      res: { status: 405 },
      cause: 'CONNECT',
    });
  });

  it('does not hold up a shutdown when its client leaves the connection half open', async () => {
    const { statuses, exitCode, stopMs } = await stopAfterOwnAnswer(
      { SHUTDOWN_TIMEOUT_MS: '1000', KEEP_ALIVE_TIMEOUT_MS: '60000' },
      'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n',
    );

    expect(statuses).toEqual([405]);
    expect(exitCode).toBe(0);
    expect(stopMs).toBeLessThan(4000);
  });

  it('is answered after the requests pipelined before it, which are served', async () => {
    const { data } = await converse(
      `${createPlant(7030)}CONNECT /plants HTTP/1.1\r\nHost: x\r\n\r\n`,
    );

    const [created, refused, ...more] = responsesIn(data);
    expect(created?.status).toBe(200);
    expect(JSON.parse(created!.body.toString())).toEqual({ name: 'x' });
    expect(refused?.status).toBe(405);
    expect(more).toEqual([]);
  });
});

describe('the metrics', () => {
  it('count each answer the server writes itself, by status and cause', async () => {
    const series = 'http_server_answers_total{status="400",cause="HPE_INVALID_VERSION"}';
    const count = async () => {
      const value = seriesValue(await (await fetch(`${server.baseUrl}/metrics`)).text(), series);
      return Number.isNaN(value) ? 0 : value;
    };
    const before = await count();

    const { data } = await converse('GET / HTTP/9\r\n\r\n');

    expect(responsesIn(data).map((answer) => answer.status)).toEqual([400]);
    expect(await count()).toBe(before + 1);
  });

  it('leave those answers as they are when turned off (METRICS=false)', async () => {
    const { server: unmeasured } = await startWithToken({ env: { METRICS: 'false' } });

    const { data } = await converse('GET / HTTP/9\r\n\r\n', {
      to: Number(new URL(unmeasured.baseUrl).port),
    });

    const [answer, ...more] = responsesIn(data);
    expect(answer?.status).toBe(400);
    expect(JSON.parse(answer!.body.toString())).toEqual(UNPARSEABLE);
    expect(more).toEqual([]);
    expect((await fetch(`${unmeasured.baseUrl}/metrics`)).status).toBe(404);
  });
});
