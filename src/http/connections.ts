import type http from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from '../logger';
import type { Connection } from './client-errors';

/**
 * A server's open connections, so that a shutdown reaches the responses in flight on them; and,
 * once it has, the connections whose response in flight it told to close.
 */
export interface Connections {
  readonly open: Set<Connection>;
  closing: WeakSet<Connection> | undefined;
  /** Connections closed on arrival because `maxConnections` were open (see limitConnections). */
  dropped: number;
  /** Connections closed with a request in progress after `inactivityTimeoutMs` (closeInactive). */
  timedOut: number;
}

/** A server's open connections, and those it closed on arrival or for inactivity. */
export interface ConnectionCounts {
  readonly open: number;
  readonly dropped: number;
  readonly timedOut: number;
}

const connectionsByServer = new WeakMap<http.Server, Connections>();

/** The connections of a server that limitConnections tracks; undefined for another. */
export function connectionsOf(server: http.Server): Connections | undefined {
  return connectionsByServer.get(server);
}

/** The connection counts of a server that limitConnections tracks; zeros for another. */
export function connectionCounts(server: http.Server): ConnectionCounts {
  const connections = connectionsByServer.get(server);
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

/** A connection's libuv stream, whose queue of writes not yet taken by the kernel node:net reads. */
type WithHandle = { _handle?: { writeQueueSize?: number } | null };

/** The bytes of a connection's writes that its libuv stream holds, not yet taken by the kernel. */
export function queuedForKernel(socket: Socket): number {
  return (socket as WithHandle)._handle?.writeQueueSize ?? 0;
}

/** What a connection had moved when last looked at, and since when it has not moved. */
interface Movement {
  readonly read: number;
  readonly written: number;
  readonly queued: number;
  readonly since: number;
}

/**
 * Closes a connection on which nothing moves while a request is in progress (no byte read, no byte
 * of its answer taken) for `timeoutMs`, unless the server itself is still working on it (the
 * request has arrived whole, and its answer has not begun: waiting for the store, whose own
 * time-outs bound the wait, PG_CONNECT_TIMEOUT_MS and PG_STATEMENT_TIMEOUT_MS over PostgreSQL, and
 * SQLITE_BUSY_TIMEOUT_MS and SQLITE_SYNC_TIMEOUT_MS over SQLite). Above all a client that stops
 * reading its answers: the answer, and the pipelined requests behind it, waited in memory for as
 * long as the client kept the connection open, with no end (REQUEST_TIMEOUT_MS ends a request still
 * arriving, and KEEP_ALIVE_TIMEOUT_MS a connection between requests, not this one). A write moves
 * when the kernel takes more of it: libuv's queue of the connection's writes (`writeQueueSize`,
 * which node:net's own socket time-out reads for the same purpose) shrinks. The connections are
 * looked at once a second, as node:http looks at its time-outs, so that a request pays nothing for
 * it (node:net's socket time-out, set and refreshed on every request, read and write, cost 1.5% of
 * the requests), and those closed are counted and logged once for many.
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
      // Nor one the server is still working on, whole and not yet answered: the wait is the
      // server's, not the client's, and the store's own time-outs end it with a 503.
      const response = socket._httpMessage;
      const incoming = socket.parser?.incoming;
      if (
        response === null ||
        response === undefined ||
        (incoming && !incoming.complete && socket.writableLength === 0) ||
        (!response.headersSent && response.req.complete && socket.writableLength === 0)
      ) {
        seen.delete(socket);
        continue;
      }
      const read = socket.bytesRead;
      const written = socket.bytesWritten;
      const queued = queuedForKernel(socket);
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

/** How many connections may be open at once, and how long one may sit with nothing moving. */
export interface ConnectionLimits {
  readonly maxConnections: number;
  readonly inactivityTimeoutMs: number;
}

/**
 * Tracks the server's open connections (for a shutdown, and for connectionCounts) and bounds them:
 * at most `maxConnections` open, and one on which nothing moves for `inactivityTimeoutMs` while a
 * request is in progress closed (closeInactive).
 *
 * Each connection costs memory (its buffers, its parser, up to a read of pipelined requests) and a
 * file descriptor, and a flood of connections would otherwise take the process's memory. One more
 * than the limit is closed as it arrives, before anything of it is read, as node:net's own
 * maxConnections would; that one is not used, since under node:cluster (WORKERS) Node 20's closes
 * nothing: a full worker hands the connection back to the primary, which gives it to another
 * worker, or to the same one later, so the connections would not be bounded.
 */
export function limitConnections(
  server: http.Server,
  { maxConnections, inactivityTimeoutMs }: ConnectionLimits,
  logger: Logger,
): Connections {
  const connections: Connections = {
    open: new Set(),
    closing: undefined,
    dropped: 0,
    timedOut: 0,
  };
  connectionsByServer.set(server, connections);
  const reportDrop = createCloseReporter(
    logger,
    'connections closed on arrival: MAX_CONNECTIONS connections are open',
    { maxConnections },
  );
  server.on('connection', (socket: Socket) => {
    if (connections.open.size >= maxConnections) {
      connections.dropped++;
      socket.destroy();
      reportDrop();
      return;
    }
    connections.open.add(socket);
    socket.once('close', () => connections.open.delete(socket));
  });
  closeInactive(server, connections, inactivityTimeoutMs, logger);
  return connections;
}
