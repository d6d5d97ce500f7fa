import http from 'node:http';
import net from 'node:net';
import type { Express } from 'express';
import type { HttpServerConfig } from './config';
import {
  createClientErrorHandler,
  createConnectHandler,
  serverAnsweredOn,
  type Connection,
  type ServerAnswerListener,
} from './http/client-errors';
import { connectionsOf, limitConnections } from './http/connections';
import { announcesBody, awaitContinue } from './http/json-body';
import { expressMessageClasses } from './http/message-shape';
import { runInTurn, stopReading } from './http/pipelining';
import { markUnparseableTarget } from './http/route-gate';
import { closeWhenBodyIsLeft, isLingering, limitUnreadBody } from './http/unread-body';
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

/**
 * The HTTP server around the app, with deliberate limits: headers must arrive within
 * headersTimeoutMs (slow clients are cut off), a whole request within requestTimeoutMs, idle
 * keep-alive connections close after keepAliveTimeoutMs, headers over maxHeaderBytes get 431, at
 * most maxConnections are open at once, and one on which nothing moves for inactivityTimeoutMs
 * while a request is in progress is closed (limitConnections). `logger` gets the request lines of
 * the answers the server writes itself, and `onServerAnswer` (the metrics) hears of each.
 */
export function createHttpServer(
  app: Express,
  config: HttpServerConfig,
  logger: Logger,
  onServerAnswer?: ServerAnswerListener,
): http.Server {
  const messageClasses = expressMessageClasses(app);
  closeWhenBodyIsLeft(messageClasses.ServerResponse);
  staleUnderNoCache(messageClasses.IncomingMessage);
  const server = http.createServer({
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
  });
  // Every header line is read: node:http's default stops at 2,000 (its count of raw entries) and
  // drops the lines after them unseen, so a Content-Encoding, a second Host or a second
  // Authorization placed after a thousand filler lines would escape the checks of `handle` below
  // and the app's. The header bytes stay bounded by maxHeaderSize.
  server.maxHeadersCount = 0;
  server.on(
    'clientError',
    createClientErrorHandler(logger, config.keepAliveTimeoutMs, onServerAnswer),
  );
  server.on('connect', createConnectHandler(logger, config.keepAliveTimeoutMs, onServerAnswer));
  const connections = limitConnections(server, config, logger);
  const handle: http.RequestListener = (req, res) => {
    // Its headers came after the server's own answer on the connection: not processed, and the
    // connection is read no further, so that requests sent after the answer do not pile up in the
    // process until it is let go (client-errors.ts).
    if (serverAnsweredOn(req.socket)) {
      stopReading(req.socket);
      return;
    }
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
  server.on('request', handle);
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

/** node:http's parser of a connection, as isIdle reads it: how long its request has been arriving. */
type RequestParser = { duration(): number };

/**
 * Whether a shutdown may close a connection now: node:http's parser has begun no request on it (its
 * `duration()`, the time since the request began to arrive, is 0 between requests, as node:http's
 * own list of idle connections has it), no response is in progress or waiting on it, and nothing of
 * an answer is left in the process for the kernel to take. node:http's closeIdleConnections closes
 * a connection once its response has ended (`finished`), which comes before its bytes have left
 * the process: of four 1.7 MB docs assets pipelined by a slow reader, the one being written at the
 * signal lost its last 1 MB, and the next was never sent. Here its connection stays until the
 * response is written whole (node:http detaches it from the connection at its 'finish', once the
 * kernel has taken its last byte), and those behind it go on as in any drain; a reader that stops
 * is cut by INACTIVITY_TIMEOUT_MS, and any by the deadline. A connection without a parser (a
 * CONNECT's) is left to its own time-out.
 */
function isIdle(socket: Connection): boolean {
  return (
    (socket.parser as RequestParser | null | undefined)?.duration() === 0 &&
    (socket._httpMessage === null || socket._httpMessage === undefined) &&
    socket.writableLength === 0
  );
}

/** A connection the server answered itself, whose answer has left the process: nothing is due on it. */
function answeredAndSent(socket: Connection): boolean {
  return serverAnsweredOn(socket) && socket.writableFinished;
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
  const connections = connectionsOf(server);
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
  // A keep-alive connection whose last request just finished is closed at once, not after its
  // time-out (isIdle). A connection kept open only to read the rest of a body after its answer
  // (lingerForBody), or after the server's own answer (answeredAndSent), would hold the shutdown up
  // to its deadline: its answer is written, and it goes now.
  const closeIdle = () => {
    for (const socket of connections?.open ?? []) {
      if (isLingering(socket) || isIdle(socket) || answeredAndSent(socket)) socket.destroy();
    }
  };
  return new Promise((resolve) => {
    // node:http closes the connections it still reads; a CONNECT's (client-errors.ts) is no longer
    // one of them.
    const deadline = setTimeout(() => {
      server.closeAllConnections();
      for (const socket of connections?.open ?? []) socket.destroy();
    }, deadlineMs);
    const sweep = setInterval(closeIdle, 50);
    deadline.unref();
    sweep.unref();
    // net.Server's close, not http.Server's: that one also closes the connections node:http counts
    // as idle, answers still going out among them (see isIdle), and stops node:http's check of
    // HEADERS_TIMEOUT_MS and REQUEST_TIMEOUT_MS, so that a request whose headers were still arriving
    // got no 408 and held the drain up to its deadline. The check goes on during the drain, and
    // after it, with no connection left to find (its timer does not keep the process alive).
    net.Server.prototype.close.call(server, () => {
      clearTimeout(deadline);
      clearInterval(sweep);
      resolve();
    });
    closeIdle();
  });
}
