/**
 * The answers node:http's server writes itself, to requests it could not read whole (a malformed
 * request, headers too large, a time-out), before any reached the app, and to CONNECT: in the
 * contract's Error shape, after the responses to the requests before them on the connection.
 */
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from '../logger';
import { queuedForKernel } from './connections';
import { markAnsweredByServer, newRequestId, requestLineOf } from './request-log';

const STATUS_TEXT: Readonly<Record<number, string>> = {
  400: 'The request could not be parsed as HTTP/1.1.',
  408: 'The request took too long to arrive.',
  431: 'The request headers are too large.',
};

/** Hears of each answer the server writes itself: its status, and Node's error code or `CONNECT`. */
export type ServerAnswerListener = (status: number, cause: string | undefined) => void;

/** What node:http reports of a request it could not parse: the chunk, and where in it parsing failed. */
type ClientError = NodeJS.ErrnoException & { rawPacket?: Buffer; bytesParsed?: number };

/**
 * Where a request line may start: a method at the start of a line or of the chunk, followed by
 * neither a header name's character nor a colon; or a method anywhere, followed by a space, a
 * target and another space (the line of a request that came right after the previous request's
 * body). A header's value may hold a method's name (`X-Method: DELETE`), and a header's name may be
 * one (`HEAD: x`), but neither is taken for a request line; only a value written as one would be.
 */
const METHODS = 'GET|HEAD|POST|PUT|DELETE|OPTIONS|PATCH|TRACE|CONNECT';
const REQUEST_LINE = new RegExp(
  `(?<=^|[\\r\\n])(${METHODS})(?![-!#$%&'*+.^_\`|~0-9A-Za-z:])|(${METHODS})(?= [^ \\r\\n]+ )`,
  'g',
);

/**
 * Whether the request Node could not parse is a HEAD, whose answer has no body. The chunk that
 * failed (rawPacket) need not begin with that request: the end of the connection's previous
 * request, its body, can arrive in the same chunk, with no line break before the request line. So
 * the method is that of the last request line that starts in the chunk before the position of the
 * error (bytesParsed). A request whose line came in an earlier chunk (headers over the limit that
 * arrived in parts) is not known for a HEAD, and its answer has the body.
 */
function failedRequestIsHead(error: ClientError): boolean {
  const raw = error.rawPacket;
  if (raw === undefined) return false;
  const end = typeof error.bytesParsed === 'number' ? error.bytesParsed + 1 : raw.length;
  let method: string | undefined;
  for (const line of raw.toString('latin1').matchAll(REQUEST_LINE)) {
    if (line.index >= end) break;
    method = line[1] ?? line[2];
  }
  return method === 'HEAD';
}

/** A response as node:http keeps it: `_hasBody` is false for a HEAD (set from the method it arrived with). */
type OwnResponse = http.ServerResponse & { _hasBody?: boolean };

/**
 * A connection as node:http keeps it: the response it is writing now, if any, and its parser,
 * whose `incoming` is the last request whose headers it read.
 */
export type Connection = Socket & {
  _httpMessage?: OwnResponse | null;
  /** node:http's mark of a connection it stopped reading, which it then starts again itself. */
  _paused?: boolean;
  parser?: { incoming?: http.IncomingMessage | null; resume?(): void } | null;
};

/**
 * Calls `then` once the responses to the requests before the failed one are written. node:http
 * writes one response at a time: the one on the socket (_httpMessage), then, when that one is
 * done, the next in its queue. A response whose request did not arrive whole is the failed
 * request's own (its headers arrived, its body did not): `then` gets it, or undefined.
 */
function afterEarlierResponses(
  socket: Connection,
  then: (failedOwn: OwnResponse | undefined) => void,
): void {
  const current = socket._httpMessage;
  if (!current || !current.req.complete) {
    then(current ?? undefined);
    return;
  }
  // Once it is written or the connection is gone; node:http has then put the next one in its place.
  current.once('close', () => afterEarlierResponses(socket, then));
}

/** Connections the server has answered itself, which it closes; see serverAnsweredOn. */
const answeredConnections = new WeakSet<Socket>();

/**
 * Whether the server has written an answer of its own on this connection (a 400, 408 or 431, or
 * the 405 to CONNECT), after which it closes it. No request on it is processed after that answer,
 * neither the one it answered, whose body may still arrive whole, nor one whose headers arrive
 * after it (RFC 9112 section 9.6): its client was told that the request failed, and a late body
 * must not store or delete a plant behind that answer.
 */
export function serverAnsweredOn(socket: Socket): boolean {
  return answeredConnections.has(socket);
}

/** What a connection still holds of its answers in the process, not yet taken by the kernel. */
function unsent(socket: Socket): number {
  return socket.writableLength + queuedForKernel(socket);
}

/**
 * Lets go of a connection the server has answered itself: `lingerMs` after its answer has left the
 * process (the socket's 'finish'), so that its client has had that long to read it before a
 * reset could discard it; or once the client has taken nothing more of its answers for `lingerMs`
 * (it stopped reading); or when the client closes its side.
 */
function letGoAfterAnswer(socket: Socket, lingerMs: number): void {
  let left = unsent(socket);
  const unlessTaking = () => {
    const now = unsent(socket);
    if (now >= left) {
      socket.destroy();
      return;
    }
    left = now;
    timer = setTimeout(unlessTaking, lingerMs).unref();
  };
  let timer = setTimeout(unlessTaking, lingerMs).unref();
  socket.once('finish', () => {
    clearTimeout(timer);
    timer = setTimeout(() => socket.destroy(), lingerMs).unref();
  });
  socket.once('close', () => clearTimeout(timer));
}

/**
 * Writes an answer of the server's own in the contract's Error shape, and closes the connection:
 * this side at once, after the answer, and the whole connection as letGoAfterAnswer says. Until
 * then what arrives is read and processed no more (serverAnsweredOn): a client that goes on
 * sending cannot turn the close into a reset that would discard the answer before it reads it,
 * except one that sends whole requests, whose connection is read no further (see server.ts).
 */
function writeAnswer(
  socket: Socket,
  lingerMs: number,
  answer: {
    readonly status: number;
    readonly message: string;
    readonly reqId: string;
    /** A response to HEAD: no body. */
    readonly head: boolean;
    readonly headers?: string;
  },
): void {
  const { status, reqId } = answer;
  const body = JSON.stringify({ error: status, message: answer.message });
  socket.end(
    `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\n` +
      `X-Request-Id: ${reqId}\r\n` +
      // RFC 9110 section 6.6.1: an origin server with a clock sends Date with every 4xx.
      `Date: ${new Date().toUTCString()}\r\n` +
      (answer.headers ?? '') +
      'Content-Type: application/json; charset=utf-8\r\n' +
      'X-Content-Type-Options: nosniff\r\n' +
      'Cache-Control: no-store\r\n' +
      `Content-Length: ${Buffer.byteLength(body)}\r\n` +
      'Connection: close\r\n\r\n' +
      (answer.head ? '' : body),
  );
  answeredConnections.add(socket);
  letGoAfterAnswer(socket, lingerMs);
}

/**
 * Answers a request Node could not read whole, in the contract's Error shape, and logs its request
 * line: the id, the status and Node's error code. When its headers arrived (its body stopped or
 * came too slowly), the app had given it its X-Request-Id (see createRequestLog), which the answer
 * and the line keep, and the line has its method and path too; else the id is new.
 */
function answerClientError(
  error: ClientError,
  socket: Socket,
  lingerMs: number,
  logger: Logger,
  failedOwn: OwnResponse | undefined,
): number {
  const status =
    error.code === 'HPE_HEADER_OVERFLOW'
      ? 431
      : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? 408
        : 400;
  const ownId = failedOwn?.getHeader('X-Request-Id');
  const reqId = typeof ownId === 'string' ? ownId : randomUUID();
  // A response to HEAD has no body, even when the rest of the request could not be parsed: its
  // own response knows its method; without one, the failed bytes may say.
  const head = failedOwn === undefined ? failedRequestIsHead(error) : failedOwn._hasBody === false;
  writeAnswer(socket, lingerMs, { status, message: STATUS_TEXT[status] as string, reqId, head });
  if (failedOwn !== undefined) markAnsweredByServer(failedOwn);
  const req = failedOwn === undefined ? undefined : requestLineOf(failedOwn.req);
  logger.info({ reqId, req, res: { status }, cause: error.code }, 'request');
  return status;
}

/**
 * Handles node:http's clientError: answers the failed request (answerClientError) after the
 * responses to the requests before it on the connection, then closes the connection, at the
 * latest as letGoAfterAnswer says. Node reports a parse error again for each chunk that arrives
 * after it, so each connection is answered once.
 */
export function createClientErrorHandler(
  logger: Logger,
  lingerMs: number,
  onAnswer?: ServerAnswerListener,
): (error: ClientError, socket: Socket) => void {
  const answered = new WeakSet<Socket>();
  return (error, socket) => {
    if (error.code === 'ECONNRESET') {
      socket.destroy();
      return;
    }
    // Each chunk after a parse error is reported again: read and dropped, as after any answer of
    // the server's own, until the connection is let go.
    if (serverAnsweredOn(socket)) return;
    if (!socket.writable) {
      socket.destroy();
      return;
    }
    if (answered.has(socket)) return;
    answered.add(socket);
    const connection: Connection = socket;
    afterEarlierResponses(connection, (failedOwn) => {
      // Its own response begun, an answer would corrupt it; or the app has answered the request
      // already, before its body came whole (a 404, a 401), and a second answer would be one to no
      // request: the connection can only be cut.
      const answeredEarly =
        failedOwn === undefined && connection.parser?.incoming?.complete === false;
      if (!socket.writable || failedOwn?.headersSent === true || answeredEarly) {
        socket.destroy();
        return;
      }
      const status = answerClientError(error, socket, lingerMs, logger, failedOwn);
      onAnswer?.(status, error.code);
    });
  };
}

/**
 * Handles node:http's connect event. The service tunnels nothing, so it answers every CONNECT
 * request 405 with an empty Allow (no method opens a tunnel here, RFC 9110 section 10.2.1), after
 * the responses to the requests before it on the connection, and logs its request line with the
 * cause `CONNECT`. Without a listener node:http would close the connection at once, unanswered,
 * and with it the answers still due to those requests. node:http has stopped reading the
 * connection and timing it out by then: what the client sends after its request is dropped, and
 * the connection, closed from this side after the answer, closes once the client closes its side,
 * or is destroyed after `idleTimeoutMs` without traffic before the answer (KEEP_ALIVE_TIMEOUT_MS),
 * and as letGoAfterAnswer says after it, whatever the client sends.
 */
export function createConnectHandler(
  logger: Logger,
  idleTimeoutMs: number,
  onAnswer?: ServerAnswerListener,
): (req: http.IncomingMessage, socket: Socket) => void {
  return (req, socket) => {
    // node:http has handed the socket over with its own listeners removed.
    socket.on('error', () => socket.destroy());
    socket.setTimeout(idleTimeoutMs, () => socket.destroy());
    socket.resume();
    afterEarlierResponses(socket, () => {
      if (!socket.writable) {
        socket.destroy();
        return;
      }
      const status = 405;
      const reqId = newRequestId(req.headers['x-request-id']);
      const message = 'CONNECT is not allowed: this service is not a proxy.';
      writeAnswer(socket, idleTimeoutMs, {
        status,
        message,
        reqId,
        head: false,
        headers: 'Allow: \r\n',
      });
      logger.info({ reqId, req: requestLineOf(req), res: { status }, cause: 'CONNECT' }, 'request');
      onAnswer?.(status, 'CONNECT');
    });
  };
}
