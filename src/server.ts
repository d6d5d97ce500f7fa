import http from 'node:http';
import { Socket } from 'node:net';
import type { Express } from 'express';
import type { HttpServerConfig } from './config';
import {
  createClientErrorHandler,
  createConnectHandler,
  type Connection,
  type ServerAnswerListener,
} from './http/client-errors';
import { announcesBody, awaitContinue } from './http/json-body';
import { expressMessageClasses } from './http/message-shape';
import { markUnparseableTarget } from './http/route-gate';
import type { Logger } from './logger';

/** An http or https URL as a request target: its authority, then its path, query and fragment. */
const HTTP_URL_TARGET = /^https?:\/\/([^/?#]*)(.*)$/is;

/** Whether `authority` names a host, as an http URL's must (RFC 9110 section 4.2.1). */
function isHostAuthority(authority: string): boolean {
  try {
    return new URL(`http://${authority}`).hostname !== '';
  } catch {
    return false;
  }
}

/**
 * An absolute-form target (RFC 9112 section 3.2.2) becomes origin-form, so that routing and
 * validation see the same path: the path and query exactly as sent, so that both forms of a path
 * are one resource (a URL parser would resolve `/nope/../metrics` to `/metrics` and read a
 * backslash as a slash, which the origin form of the same path does not). A target that is not an
 * http or https URL with a host is marked for the app to answer 400 (see markUnparseableTarget):
 * left as it was, the route gate and the validator could read different paths from it (Express's
 * lenient parser reads `/healthz` in `http://x:99999/healthz`).
 */
function toOriginForm(req: http.IncomingMessage): void {
  const target = req.url ?? '/';
  if (target.startsWith('/') || target === '*') return;
  const url = HTTP_URL_TARGET.exec(target);
  // Only http and https name a resource of an HTTP server: another scheme's URL (`foo://x`) may
  // have no path at all, which Express could not route.
  if (url !== null && isHostAuthority(url[1]!)) {
    const rest = url[2]!;
    req.url = rest.startsWith('/') ? rest : `/${rest}`;
  } else {
    markUnparseableTarget(req);
    // Kept for the log line, without the credentials a `user:password@` before the host would give.
    req.url = `/#${target.replace(/^([A-Za-z][A-Za-z0-9+.-]*:\/\/)[^/?#@]*@/, '$1')}`;
  }
}

/**
 * A server's open connections, so that a shutdown reaches the responses in flight on them; and,
 * once it has, the connections whose response in flight it told to close.
 */
interface Connections {
  readonly open: Set<Connection>;
  closing: WeakSet<Connection> | undefined;
  /** Connections closed on arrival because `maxConnections` were open (see createHttpServer). */
  dropped: number;
  /** Connections closed with a request in progress after `inactivityTimeoutMs` (the same). */
  timedOut: number;
}

/** A server's open connections, and those it closed on arrival or for inactivity. */
export interface ConnectionCounts {
  readonly open: number;
  readonly dropped: number;
  readonly timedOut: number;
}

/** The connection counts of a server made by createHttpServer; zeros for another. */
export function connectionCounts(server: http.Server): ConnectionCounts {
  const connections = connectionsOf.get(server);
  return {
    open: connections?.open.size ?? 0,
    dropped: connections?.dropped ?? 0,
    timedOut: connections?.timedOut ?? 0,
  };
}

/** How often, at most, the log says that connections were closed for one of the causes below. */
const CLOSE_REPORT_INTERVAL_MS = 10_000;

/**
 * Tells the log of connections the server closed for one cause (`message`): the first at once,
 * then, while more come, one line every CLOSE_REPORT_INTERVAL_MS with how many (`closed`), so
 * that a flood of them cannot flood the log.
 */
function createCloseReporter(
  logger: Logger,
  message: string,
  fields: Record<string, number>,
): () => void {
  let unreported = 0;
  let quiet: NodeJS.Timeout | undefined;
  const report = () => {
    logger.warn({ closed: unreported, ...fields }, message);
    unreported = 0;
    quiet = setTimeout(endQuiet, CLOSE_REPORT_INTERVAL_MS).unref();
  };
  const endQuiet = () => {
    quiet = undefined;
    if (unreported > 0) report();
  };
  return () => {
    unreported++;
    if (quiet === undefined) report();
  };
}

const connectionsOf = new WeakMap<http.Server, Connections>();

/**
 * Whether to serve a request pipelined behind a response the shutdown told to close. While that
 * response has not begun, it keeps the connection after all, and this request, which reached the
 * app during the shutdown, closes it instead (responseHeaders). Once it has begun, the connection
 * ends after it and this request's answer could not be sent: it is left unprocessed and
 * unanswered, which tells its client to send it again (RFC 9112 section 9.3.2).
 */
function servePipelinedAfterClose(socket: Connection, closing: WeakSet<Connection>): boolean {
  const current = socket._httpMessage;
  if (!current || current.headersSent) return false;
  current.removeHeader('Connection');
  closing.delete(socket);
  return true;
}

/**
 * Bytes of a connection that node:http reads, after an answer written before its request's body
 * arrived whole, before the connection stops being read; see limitUnreadBody.
 */
const UNREAD_BODY_DRAIN_BYTES = 64 * 1024;

/**
 * Whether a request's answer, about to be written, leaves more of the body its Content-Length
 * announces unread than the server reads after it (UNREAD_BODY_DRAIN_BYTES): the connection then
 * cannot carry another request. The body received so far waits in the request's buffer (it was
 * not read, or the answer would not come before its end). A chunked body's length is not known:
 * its answer keeps the connection, which closes after the allowance if the body goes on.
 */
function leavesBodyUnread(req: http.IncomingMessage): boolean {
  if (req.complete || req.headers['transfer-encoding'] !== undefined) return false;
  const length = req.headers['content-length'];
  return length !== undefined && Number(length) - req.readableLength > UNREAD_BODY_DRAIN_BYTES;
}

/**
 * Makes the answers written by `Response` say `Connection: close` when they leave their
 * request's body unread past what the server reads after them (leavesBodyUnread): told
 * keep-alive, a client would send its next request on a connection the server is closing (a
 * keep-alive agent of node:http then got ECONNRESET on every second 1 MB POST answered before
 * its body was read).
 * A method of the app's response class (see expressMessageClasses), so that no answer is missed
 * (every answer goes through writeHead, which node:http calls itself when the app does not), and
 * one to a request read whole pays one property read.
 */
function closeWhenBodyIsLeft(Response: typeof http.ServerResponse): void {
  const { writeHead } = Response.prototype;
  Response.prototype.writeHead = function writeHeadClosingWhenBodyIsLeft(
    this: http.ServerResponse,
  ) {
    if (leavesBodyUnread(this.req)) this.shouldKeepAlive = false;
    // eslint-disable-next-line prefer-rest-params -- passed on as they came, without a copy
    return writeHead.apply(this, arguments as unknown as Parameters<typeof writeHead>);
  } as typeof writeHead;
}

/** Cache-Control's no-cache directive, in any case (RFC 9111 section 5.2: directives are case-insensitive). */
const NO_CACHE = /(?:^|,)\s*no-cache\s*(?:,|$)/i;

/**
 * Makes a request whose Cache-Control holds no-cache, in any case, never fresh. Express answers 304
 * to a conditional GET that matches (its `req.fresh`, read by res.send) unless Cache-Control holds
 * no-cache, which its check (the `fresh` package) reads in lower case only, so `NO-CACHE` got a
 * 304. Here its getter is kept and its answer overruled: only for a request it finds fresh, which
 * only a conditional GET or HEAD can be, is the header read again.
 */
function staleUnderNoCache(Request: typeof http.IncomingMessage): void {
  let owner: object | null = Request.prototype;
  while (owner !== null && !Object.prototype.hasOwnProperty.call(owner, 'fresh')) {
    owner = Object.getPrototypeOf(owner) as object | null;
  }
  const fresh = owner === null ? undefined : Object.getOwnPropertyDescriptor(owner, 'fresh')?.get;
  if (fresh === undefined) throw new Error("Express's request has no `fresh` getter.");
  Object.defineProperty(Request.prototype, 'fresh', {
    configurable: true,
    enumerable: true,
    get(this: http.IncomingMessage): boolean {
      return fresh.call(this) === true && !NO_CACHE.test(this.headers['cache-control'] ?? '');
    },
  });
}

/** node:http's mark of a response after which it closes the connection. */
type ClosingResponse = http.ServerResponse & { _last?: boolean };

/**
 * Ends a connection's side without destroying it: in the place of node:http's destroySoon once an
 * answer that closes the connection left its request's body unread (see limitUnreadBody).
 */
function endLingering(this: Socket): void {
  this.end();
}

/** Connections kept open only to read the rest of a body after an answer that closes them. */
const lingering = new WeakSet<Socket>();

/**
 * Keeps a connection whose answer closes it open while its request's body still arrives; see
 * limitUnreadBody. Once the body has arrived whole, the connection is closed as node:http would
 * have closed it; a shutdown closes it at once (closeGracefully).
 */
function lingerForBody(req: http.IncomingMessage, socket: Socket): void {
  lingering.add(socket);
  socket.destroySoon = endLingering;
  req.once('end', () => Socket.prototype.destroySoon.call(socket));
}

/**
 * After an answer written before its request's body arrived whole (an error decided from the
 * headers, such as a 401 or a 404, or a GET, which ignores a body), node:http reads the rest of
 * the body and throws it away, so that the connection can carry the next request: however long
 * the body, for as long as REQUEST_TIMEOUT_MS allows, at a cost per chunk (a million chunks of one
 * byte to `/healthz` took 2.1 s of the server's CPU, no token needed). Here, once it has read
 * UNREAD_BODY_DRAIN_BYTES more of the connection, the server stops reading it and closes its side
 * (0.1 to 0.2 s for the same million chunks): the client can still read its answer, and the
 * connection is dropped when its idle time-out passes, or when the client closes it.
 *
 * An answer that closes the connection (the client asked for it, or closeWhenBodyIsLeft decided
 * it) is handled the same way. node:http would destroy the connection once the answer is written
 * (destroySoon), while the body still arrives: the kernel then answers what the client still
 * sends with a reset, which fails the client's writes (EPIPE) and may cost it the answer, unread.
 * Here its side is ended instead and the rest read as above (RFC 9112 section 9.6); the
 * connection goes once the body has arrived whole, when the client closes it, or at
 * REQUEST_TIMEOUT_MS from its request's start.
 */
function limitUnreadBody(req: http.IncomingMessage, res: http.ServerResponse): void {
  // At 'prefinish' (node:http's, emitted once the answer is written whole), before node:http
  // decides at 'finish' to drop the rest of the body unseen, or to destroy the connection: read
  // here instead, it can be counted.
  res.once('prefinish', () => {
    if (req.complete) return;
    const { socket } = req;
    if ((res as ClosingResponse)._last === true) lingerForBody(req, socket);
    const stopAt = socket.bytesRead + UNREAD_BODY_DRAIN_BYTES;
    const check = () => {
      if (socket.bytesRead <= stopAt) return;
      req.off('data', check);
      // Both paused: a request still flowing would resume the connection to read more.
      req.pause();
      socket.pause();
      socket.end();
    };
    req.on('data', check);
  });
}

/** Per connection, the requests pipelined on it that wait for their turn; see runInTurn. */
interface Turns {
  /** The response to the latest of them. */
  latest: http.ServerResponse;
  /** How many have not started yet. */
  waiting: number;
}

const turnsOf = new WeakMap<Connection, Turns>();

/**
 * Runs `serve` for a request once the request before it on the same connection has been answered
 * whole: requests pipelined on one connection are processed one at a time, in the order they came
 * (RFC 9112 section 9.3.2 lets a server process them side by side only when all are safe), so a
 * DELETE pipelined behind the POST of the same plant finds it. A request with no answer in
 * progress before it, the usual case, runs at once. While requests wait, node:http stops reading
 * the connection after the chunk it is parsing, as it does itself when answers back up (it parses
 * every request of a chunk before it can stop), and reads again once the last of them has started:
 * a client that does not read its answers holds up its own requests, and the server holds at most
 * a chunk of them.
 */
function runInTurn(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  serve: (req: http.IncomingMessage, res: http.ServerResponse) => void,
): void {
  const connection: Connection = req.socket;
  const current = connection._httpMessage;
  if (current === res || current === null || current === undefined) {
    serve(req, res);
    return;
  }
  // node:http attaches a response to the connection only once those before it are written, so
  // the one on it is the oldest in progress; the latest pipelined one, if still in progress, is
  // the one right before this request.
  let turns = turnsOf.get(connection);
  const before = turns !== undefined && !turns.latest.writableFinished ? turns.latest : current;
  if (turns === undefined) {
    turns = { latest: res, waiting: 0 };
    turnsOf.set(connection, turns);
  }
  turns.latest = res;
  turns.waiting += 1;
  if (connection._paused !== true) {
    connection._paused = true;
    connection.pause();
  }
  const waiting = turns;
  let started = false;
  const start = () => {
    if (started) return;
    started = true;
    before.off('finish', start);
    before.off('close', start);
    // The connection can no longer carry an answer (it was reset, timed out, or closes after the
    // answer before): this request is not processed, so that its client may send it again
    // (RFC 9112 section 9.3.2).
    if (!connection.writable) return;
    waiting.waiting -= 1;
    if (waiting.waiting === 0 && connection._paused === true && !connection.destroyed) {
      connection._paused = false;
      connection.parser?.resume?.();
      connection.resume();
    }
    serve(req, res);
  };
  before.on('finish', start);
  before.on('close', start);
}

/** A connection's libuv stream, whose queue of writes not yet taken by the kernel node:net reads. */
type WithHandle = { _handle?: { writeQueueSize?: number } | null };

/** What a connection had moved when last looked at, and since when it has not moved. */
interface Movement {
  readonly read: number;
  readonly written: number;
  readonly queued: number;
  readonly since: number;
}

/**
 * Closes a connection on which nothing moves while a request is in progress (no byte read, no
 * byte of its answer taken) for `timeoutMs`. Above all a client that stops reading its answers:
 * the answer, and the pipelined requests behind it, waited in memory for as long as the client
 * kept the connection open, with no end (REQUEST_TIMEOUT_MS ends a request still arriving, and
 * KEEP_ALIVE_TIMEOUT_MS a connection between requests, not this one). A write moves when the kernel
 * takes more of it: libuv's queue of the connection's writes (`writeQueueSize`, which node:net's
 * own socket time-out reads for the same purpose) shrinks. The connections are looked at once a
 * second, as node:http looks at its time-outs, so that a request pays nothing for it (node:net's
 * socket time-out, set and refreshed on every request, read and write, cost 1.5% of the
 * requests), and those closed are counted and logged once for many.
 */
function closeInactive(
  server: http.Server,
  connections: Connections,
  timeoutMs: number,
  logger: Logger,
): void {
  const report = createCloseReporter(
    logger,
    'connections closed: nothing read or written for INACTIVITY_TIMEOUT_MS while a request was in progress',
    { inactivityTimeoutMs: timeoutMs },
  );
  const seen = new WeakMap<Connection, Movement>();
  const look = () => {
    const now = performance.now();
    for (const socket of connections.open) {
      // No request in progress, or one still arriving with nothing of the server's waiting to be
      // taken: KEEP_ALIVE_TIMEOUT_MS, HEADERS_TIMEOUT_MS or REQUEST_TIMEOUT_MS (and its 408) apply.
      const incoming = socket.parser?.incoming;
      if (
        socket._httpMessage === null ||
        socket._httpMessage === undefined ||
        (incoming && !incoming.complete && socket.writableLength === 0)
      ) {
        seen.delete(socket);
        continue;
      }
      const read = socket.bytesRead;
      const written = socket.bytesWritten;
      const queued = (socket as WithHandle)._handle?.writeQueueSize ?? 0;
      const last = seen.get(socket);
      if (last?.read !== read || last.written !== written || last.queued !== queued) {
        seen.set(socket, { read, written, queued, since: now });
      } else if (now - last.since >= timeoutMs) {
        seen.delete(socket);
        connections.timedOut++;
        socket.destroy();
        report();
      }
    }
  };
  const timer = setInterval(look, Math.min(1000, timeoutMs / 2)).unref();
  server.once('close', () => clearInterval(timer));
}

/**
 * The HTTP server around the app, with deliberate limits: headers must arrive within
 * headersTimeoutMs (slow clients are cut off), a whole request within requestTimeoutMs, idle
 * keep-alive connections close after keepAliveTimeoutMs, headers over maxHeaderBytes get 431, at
 * most maxConnections are open at once, and one on which nothing moves for inactivityTimeoutMs
 * while a request is in progress is closed (closeInactive). `logger` gets the request lines of
 * the answers the server writes itself, and `onServerAnswer` (the metrics) hears of each.
 */
export function createHttpServer(
  app: Express,
  config: HttpServerConfig,
  logger: Logger,
  onServerAnswer?: ServerAnswerListener,
): http.Server {
  const connections: Connections = {
    open: new Set(),
    closing: undefined,
    dropped: 0,
    timedOut: 0,
  };
  const handle: http.RequestListener = (req, res) => {
    const { closing } = connections;
    if (closing?.has(req.socket) === true && !servePipelinedAfterClose(req.socket, closing)) {
      return;
    }
    toOriginForm(req);
    // An HTTP/1.0 request with a Transfer-Encoding may have framing that a 1.0 sender meant
    // otherwise: the connection closes after its answer (RFC 9112 section 6.1).
    // (shouldKeepAlive, not a Connection header, which a shutdown may remove; see
    // servePipelinedAfterClose.)
    if (req.httpVersionMinor === 0 && req.headers['transfer-encoding'] !== undefined) {
      res.shouldKeepAlive = false;
    }
    if (announcesBody(req)) limitUnreadBody(req, res);
    runInTurn(req, res, app);
  };
  const messageClasses = expressMessageClasses(app);
  closeWhenBodyIsLeft(messageClasses.ServerResponse);
  staleUnderNoCache(messageClasses.IncomingMessage);
  const server = http.createServer(
    {
      // Requests and responses that already have the app's prototypes (see expressMessageClasses).
      ...messageClasses,
      headersTimeout: config.headersTimeoutMs,
      requestTimeout: config.requestTimeoutMs,
      keepAliveTimeout: config.keepAliveTimeoutMs,
      maxHeaderSize: config.maxHeaderBytes,
      // How often Node checks the two time-outs above; its default (30 s) would let them overrun.
      connectionsCheckingInterval: Math.min(1000, config.headersTimeoutMs),
      // The app answers a missing Host itself, with the Error body.
      requireHostHeader: false,
      // Two lines of a header are joined, never one of them dropped: the app then refuses two Host
      // lines (RFC 9112 section 3.2), and two Authorization or Content-Type lines are no valid one.
      joinDuplicateHeaders: true,
    },
    handle,
  );
  // Every header line is read: node:http's default stops at 2,000 (its count of raw entries) and
  // drops the lines after them unseen, so a Content-Encoding, a second Host or a second
  // Authorization placed after a thousand filler lines would escape the checks above and the app's.
  // The header bytes stay bounded by maxHeaderSize.
  server.maxHeadersCount = 0;
  server.on('clientError', createClientErrorHandler(logger, onServerAnswer));
  server.on('connect', createConnectHandler(logger, config.keepAliveTimeoutMs, onServerAnswer));
  connectionsOf.set(server, connections);
  const reportDrop = createCloseReporter(
    logger,
    'connections closed on arrival: MAX_CONNECTIONS connections are open',
    { maxConnections: config.maxConnections },
  );
  // At most maxConnections open: each costs memory (its buffers, its parser, up to a read of
  // pipelined requests) and a file descriptor, and a flood of connections would otherwise take the
  // process's memory. One more is closed as it arrives, before anything of it is read, as
  // node:net's own maxConnections would; that one is not used, since under node:cluster (WORKERS)
  // Node 20's closes nothing: a full worker hands the connection back to the primary, which gives
  // it to another worker, or to the same one later, so the connections would not be bounded.
  server.on('connection', (socket: Socket) => {
    if (connections.open.size >= config.maxConnections) {
      connections.dropped++;
      socket.destroy();
      reportDrop();
      return;
    }
    connections.open.add(socket);
    socket.once('close', () => connections.open.delete(socket));
  });
  closeInactive(server, connections, config.inactivityTimeoutMs, logger);
  // RFC 9110 lets a server ignore an expectation it does not support; Node would answer a bare 417.
  server.on('checkExpectation', handle);
  // A client that expects 100-continue waits for it before it sends its body: node:http would send
  // it at once, before any check. Here the body reader sends it (awaitContinue), once the request
  // has passed the checks made before its body; a request refused before then gets its final
  // answer alone, and node:http closes the connection after it (the body may still come). A
  // request without a body has nothing to wait for: its 100 goes at once, and the connection stays
  // open. From an HTTP/1.0 client the expectation is ignored (RFC 9110 section 10.1.1).
  server.on('checkContinue', (req: http.IncomingMessage, res: http.ServerResponse) => {
    if (req.httpVersionMinor >= 1) {
      if (announcesBody(req)) awaitContinue(req);
      else res.writeContinue();
    }
    handle(req, res);
  });
  return server;
}

/**
 * Stops accepting connections, lets in-flight requests finish for up to `deadlineMs`, then closes
 * what is left; resolves once the server is closed.
 */
export function closeGracefully(server: http.Server, deadlineMs: number): Promise<void> {
  // A response not yet begun asks its client to close, as those to requests that reach the app from
  // now on do (responseHeaders): told keep-alive, a client could send its next request on a
  // connection the sweep below is closing. Not when a later request on the connection has been
  // read: its response waits behind this one, and would never be sent.
  const connections = connectionsOf.get(server);
  if (connections !== undefined) {
    const closing = new WeakSet<Connection>();
    for (const socket of connections.open) {
      const current = socket._httpMessage;
      if (current && !current.headersSent && socket.parser?.incoming === current.req) {
        current.setHeader('Connection', 'close');
        closing.add(socket);
      }
    }
    connections.closing = closing;
  }
  // A connection kept open only to read the rest of a body after its answer (lingerForBody) would
  // hold the shutdown up to its deadline: its answer is written, and it goes now.
  const closeLingering = () => {
    for (const socket of connections?.open ?? []) if (lingering.has(socket)) socket.destroy();
  };
  return new Promise((resolve) => {
    // node:http closes the connections it still reads; a CONNECT's (client-errors.ts) is no longer
    // one of them.
    const deadline = setTimeout(() => {
      server.closeAllConnections();
      for (const socket of connections?.open ?? []) socket.destroy();
    }, deadlineMs);
    // A keep-alive connection whose last request just finished is closed at once, not after its time-out.
    const sweep = setInterval(() => {
      server.closeIdleConnections();
      closeLingering();
    }, 50);
    deadline.unref();
    sweep.unref();
    server.close(() => {
      clearTimeout(deadline);
      clearInterval(sweep);
      resolve();
    });
    server.closeIdleConnections();
    closeLingering();
  });
}
