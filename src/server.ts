import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { Socket } from 'node:net';
import type { Express } from 'express';
import type { HttpServerConfig } from './config';
import { expressMessageClasses } from './http/message-shape';
import { markUnparseableTarget } from './http/route-gate';
import type { Logger } from './logger';

const STATUS_TEXT: Readonly<Record<number, string>> = {
  400: 'The request could not be parsed as HTTP/1.1.',
  408: 'The request took too long to arrive.',
  431: 'The request headers are too large.',
};

/** What node:http reports of a request it could not parse: the chunk, and where in it parsing failed. */
type ClientError = NodeJS.ErrnoException & { rawPacket?: Buffer; bytesParsed?: number };

/** An HTTP method as it starts a request line: the name, then no other letter. */
const METHOD_TOKEN = /(?:GET|HEAD|POST|PUT|DELETE|OPTIONS|PATCH|TRACE|CONNECT)(?![A-Za-z])/g;

/**
 * Whether the request Node could not parse is a HEAD, whose answer has no body. The chunk that
 * failed (rawPacket) need not begin with that request: the end of the connection's previous
 * request, its body, can arrive in the same chunk. So the method is the last one in the chunk
 * before the position of the error (bytesParsed).
 */
function failedRequestIsHead(error: ClientError): boolean {
  const raw = error.rawPacket;
  if (raw === undefined) return false;
  const end = typeof error.bytesParsed === 'number' ? error.bytesParsed + 1 : raw.length;
  const methods = raw.subarray(0, end).toString('latin1').match(METHOD_TOKEN);
  return methods?.[methods.length - 1] === 'HEAD';
}

/** A connection as node:http keeps it: the response it is writing now, if any. */
type Connection = Socket & { _httpMessage?: http.ServerResponse | null };

/**
 * Calls `then` once the responses to the requests before the failed one are written. node:http
 * writes one response at a time: the one on the socket (_httpMessage), then, when that one is
 * done, the next in its queue. A response whose request did not arrive whole is the failed
 * request's own; `then` learns whether it was begun.
 */
function afterEarlierResponses(socket: Connection, then: (failedOneBegun: boolean) => void): void {
  const current = socket._httpMessage;
  if (!current || !current.req.complete) {
    then(current?.headersSent === true);
    return;
  }
  // Once it is written or the connection is gone; node:http has then put the next one in its place.
  current.once('close', () => afterEarlierResponses(socket, then));
}

/**
 * Answers a request Node rejected before it reached the app, in the contract's Error shape with a
 * new X-Request-Id (the request's own was never read), and logs its request line: the id, the
 * status and Node's error code, as no method, path or operation is known.
 */
function answerClientError(error: ClientError, socket: Socket, logger: Logger): void {
  const status =
    error.code === 'HPE_HEADER_OVERFLOW'
      ? 431
      : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? 408
        : 400;
  const body = JSON.stringify({ error: status, message: STATUS_TEXT[status] });
  const reqId = randomUUID();
  // A response to HEAD has no body, even when the rest of the request could not be parsed.
  const head = failedRequestIsHead(error);
  socket.end(
    `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\n` +
      `X-Request-Id: ${reqId}\r\n` +
      'Content-Type: application/json; charset=utf-8\r\n' +
      'X-Content-Type-Options: nosniff\r\n' +
      'Cache-Control: no-store\r\n' +
      `Content-Length: ${Buffer.byteLength(body)}\r\n` +
      'Connection: close\r\n\r\n' +
      (head ? '' : body),
  );
  logger.info({ reqId, res: { status }, cause: error.code }, 'request');
}

/**
 * Handles node:http's clientError: answers the failed request (answerClientError) after the
 * responses to the requests before it on the connection, then closes the connection. Node reports
 * a parse error again for each chunk that arrives after it, so each connection is answered once.
 */
function createClientErrorHandler(logger: Logger): (error: ClientError, socket: Socket) => void {
  const answered = new WeakSet<Socket>();
  return (error, socket) => {
    if (!socket.writable || error.code === 'ECONNRESET') {
      socket.destroy();
      return;
    }
    if (answered.has(socket)) return;
    answered.add(socket);
    afterEarlierResponses(socket, (failedOneBegun) => {
      // Its own response begun, an answer would corrupt it: the connection can only be cut.
      if (!socket.writable || failedOneBegun) socket.destroy();
      else answerClientError(error, socket, logger);
    });
  };
}

/**
 * An absolute-form target (RFC 9112 section 3.2.2) becomes origin-form, so that routing and
 * validation see the same path. A target that is not a URL either is marked for the app to answer
 * 400 (see markUnparseableTarget): left as it was, the route gate and the validator could read
 * different paths from it (Express's lenient parser reads `/healthz` in `http://x:99999/healthz`).
 */
function toOriginForm(req: http.IncomingMessage): void {
  const target = req.url ?? '/';
  if (target.startsWith('/') || target === '*') return;
  try {
    const url = new URL(target);
    req.url = url.pathname + url.search + url.hash;
  } catch {
    markUnparseableTarget(req);
    req.url = `/#${target}`;
  }
}

/**
 * The HTTP server around the app, with deliberate limits: headers must arrive within
 * headersTimeoutMs (slow clients are cut off), a whole request within requestTimeoutMs, idle
 * keep-alive connections close after keepAliveTimeoutMs, and headers over maxHeaderBytes get 431.
 * `logger` gets the request lines of the answers the server writes itself.
 */
export function createHttpServer(
  app: Express,
  config: HttpServerConfig,
  logger: Logger,
): http.Server {
  const handle: http.RequestListener = (req, res) => {
    toOriginForm(req);
    app(req, res);
  };
  const server = http.createServer(
    {
      // Requests and responses that already have the app's prototypes (see expressMessageClasses).
      ...expressMessageClasses(app),
      headersTimeout: config.headersTimeoutMs,
      requestTimeout: config.requestTimeoutMs,
      keepAliveTimeout: config.keepAliveTimeoutMs,
      maxHeaderSize: config.maxHeaderBytes,
      // How often Node checks the two time-outs above; its default (30 s) would let them overrun.
      connectionsCheckingInterval: Math.min(1000, config.headersTimeoutMs),
      // The app answers a missing Host itself, with the Error body.
      requireHostHeader: false,
    },
    handle,
  );
  server.on('clientError', createClientErrorHandler(logger));
  // RFC 9110 lets a server ignore an expectation it does not support; Node would answer a bare 417.
  server.on('checkExpectation', handle);
  return server;
}

/**
 * Stops accepting connections, lets in-flight requests finish for up to `deadlineMs`, then closes
 * what is left; resolves once the server is closed.
 */
export function closeGracefully(server: http.Server, deadlineMs: number): Promise<void> {
  return new Promise((resolve) => {
    const deadline = setTimeout(() => server.closeAllConnections(), deadlineMs);
    // A keep-alive connection whose last request just finished is closed at once, not after its time-out.
    const sweep = setInterval(() => server.closeIdleConnections(), 50);
    deadline.unref();
    sweep.unref();
    server.close(() => {
      clearTimeout(deadline);
      clearInterval(sweep);
      resolve();
    });
    server.closeIdleConnections();
  });
}
