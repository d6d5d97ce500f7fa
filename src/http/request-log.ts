import cluster from 'node:cluster';
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RequestHandler } from 'express';
import pino from 'pino';
import type { Logger } from '../logger';
import { methodAsSent, routedOperation } from './route-gate';

/** An incoming id is kept only when it is short and plain, so it cannot forge log lines or headers. */
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** The id a request gets: the caller's `X-Request-Id` when it is well-formed, else a new UUID. */
export function newRequestId(incoming: string | string[] | undefined): string {
  return typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : randomUUID();
}

/** The request's id: the caller's well-formed `X-Request-Id`, or a new UUID. */
export function requestIdOf(res: ServerResponse): string {
  return (res as { locals?: Record<string, unknown> }).locals?.['requestId'] as string;
}

/** The path of a request target, without its query: what the request line logs, never the query. */
export function pathOf(url: string): string {
  const query = url.indexOf('?');
  return query === -1 ? url : url.slice(0, query);
}

/**
 * The method as the client sent it and the path (never the query) of a request whose headers
 * arrived, as its request line has them; other lines about the request name it so too.
 */
export function requestLineOf(req: IncomingMessage): { method: string; path: string } {
  return { method: methodAsSent(req), path: pathOf(req.url ?? '') };
}

/** What is known of a request once its response is written. */
export interface FinishedRequest {
  readonly method: string;
  /** The contract operation it was routed to, if any. */
  readonly operationId: string | undefined;
  readonly status: number;
  readonly seconds: number;
}

type Level = 'info' | 'warn' | 'error';

/** The field of a request line whose connection ended before its answer was written whole. */
const ABORTED = ',"aborted":true';

/**
 * The status a request line gives a request whose connection ended before any answer was written
 * (nginx's "client closed request"); one whose answer began keeps that answer's status.
 */
const CLIENT_CLOSED_REQUEST = 499;

/** What JSON.stringify escapes in a string: quote, backslash, control characters, lone surrogates. */
// eslint-disable-next-line no-control-regex -- control characters are what it looks for
const NEEDS_ESCAPE = /["\\\u0000-\u001f\ud800-\udfff]/;

/** JSON.stringify(text), without its cost for the usual text that needs no escape. */
function jsonString(text: string): string {
  return NEEDS_ESCAPE.test(text) ? JSON.stringify(text) : `"${text}"`;
}

/** Responses the server answered itself (src/http/client-errors.ts), whose request line it wrote. */
const answeredByServer = new WeakSet<ServerResponse>();

/**
 * Marks a response whose request the server answered itself, on the socket, with a line of its
 * own: the response's close then writes no second line (see createRequestLog).
 */
export function markAnsweredByServer(res: ServerResponse): void {
  answeredByServer.add(res);
}

/** Flushes of request lines still waiting for the end of this turn of the event loop. */
const pendingFlushes = new Set<() => void>();

/** Hands every request line still held back to its logger's stream; called before the process exits. */
export function flushRequestLines(): void {
  for (const flush of pendingFlushes) flush();
}

/**
 * The most bytes a write to a pipe puts in whole (PIPE_BUF on Linux): a larger one is taken in
 * parts when the pipe is full, and other processes' writes land between them.
 */
export const PIPE_BUF = 4096;

/**
 * The most bytes of request lines handed to the stream in one write: under WORKERS (a worker), at
 * most PIPE_BUF, whole lines, as main.ts's standard output then writes them, since every process
 * shares the descriptor; a single process batches a whole turn's lines.
 */
const BATCH_BYTES = cluster.isWorker ? PIPE_BUF : Infinity;

/**
 * Writes the request line pino would write for
 * `logger[level]({ reqId, operationId, req: { method, path }, res: { status }, latencyMs }, 'request')`,
 * byte for byte, with the logger's own stream, bindings, time format and message key; redaction is
 * skipped because the line holds no header, body or query. Serialising it through pino's generic
 * path (redaction included) was a tenth of a request's CPU. The lines of one turn of the event loop
 * go to the stream in one write (the stream batches writes further; see main.ts and README,
 * "Operating it"), or under WORKERS in writes of whole lines of at most PIPE_BUF bytes (a line
 * longer than that alone, which main.ts's standard output cuts to fit: a path of kilobytes).
 * `flushRequestLines` writes what is held back at once.
 */
function requestLineWriter(logger: Logger) {
  const internals = logger as unknown as Record<symbol, unknown>;
  const { symbols } = pino;
  const stream = internals[symbols.streamSym] as { write(line: string): unknown };
  const bindings = internals[symbols.chindingsSym] as string;
  const time = internals[symbols.timeSym] as () => string;
  const message = `,${JSON.stringify(internals[symbols.messageKeySym])}:"request"}\n`;
  const bounded = BATCH_BYTES !== Infinity;
  let pending = '';
  /** The UTF-8 bytes of `pending`, counted only when bounded. */
  let pendingBytes = 0;
  let scheduled = false;
  const flush = () => {
    scheduled = false;
    pendingFlushes.delete(flush);
    if (pending === '') return;
    const lines = pending;
    pending = '';
    pendingBytes = 0;
    stream.write(lines);
  };
  const operationKeys = new Map<string | undefined, string>([[undefined, '']]);
  return (
    level: Level,
    line: {
      reqId: string;
      operationId: string | undefined;
      method: string;
      path: string;
      status: number;
      latencyMs: number;
      aborted: boolean;
    },
  ): void => {
    if (!logger.isLevelEnabled(level)) return;
    let operation = operationKeys.get(line.operationId);
    if (operation === undefined) {
      operation = `,"operationId":${JSON.stringify(line.operationId)}`;
      operationKeys.set(line.operationId, operation);
    }
    const text =
      `{"level":${logger.levels.values[level]}${time()}${bindings},"reqId":${jsonString(line.reqId)}${operation}` +
      `,"req":{"method":${jsonString(line.method)},"path":${jsonString(line.path)}}` +
      `,"res":{"status":${line.status}},"latencyMs":${line.latencyMs}` +
      `${line.aborted ? ABORTED : ''}${message}`;
    if (bounded) {
      const bytes = Buffer.byteLength(text);
      // The lines so far go now, whole, rather than make a write past the bound with this one.
      if (pendingBytes + bytes > BATCH_BYTES && pending !== '') {
        stream.write(pending);
        pending = '';
        pendingBytes = 0;
      }
      pendingBytes += bytes;
    }
    pending += text;
    if (!scheduled) {
      scheduled = true;
      pendingFlushes.add(flush);
      setImmediate(flush);
    }
  };
}

/**
 * Gives every request an id, echoed in `X-Request-Id` on every response (errors included), and
 * when the response is written, or its client goes away first, logs one line: id, operationId,
 * method, path (never the query), status, latency, and `aborted: true` when the client went away
 * before the answer was written whole (status 499 if no answer had begun); headers and bodies are
 * never logged. `onFinish` (the metrics) hears of the same moment. One listener per request and no
 * per-request child logger: pino-http's child logger was a fifth of a request's time under load
 * (see README, "Operating it").
 */
export function createRequestLog(
  logger: Logger,
  onFinish?: (request: FinishedRequest) => void,
): RequestHandler {
  const writeLine = requestLineWriter(logger);
  return (req, res, next) => {
    const started = performance.now();
    const reqId = newRequestId(req.headers['x-request-id']);
    // Kept now: the route gate serves HEAD as GET, and the log shows what the client sent.
    const method = req.method;
    const path = pathOf(req.url);
    res.locals['requestId'] = reqId;
    res.setHeader('X-Request-Id', reqId);
    let logged = false;
    const logLine = () => {
      if (logged) return;
      logged = true;
      // Whatever the app wrote after the server's own answer went nowhere.
      if (answeredByServer.has(res)) return;
      const aborted = !res.writableFinished;
      const milliseconds = performance.now() - started;
      const status = aborted && !res.headersSent ? CLIENT_CLOSED_REQUEST : res.statusCode;
      const operationId = routedOperation(res)?.operationId;
      // 503 is expected while the store is away or the instance drains: a warning, not an error.
      const level = status === 503 ? 'warn' : status >= 500 ? 'error' : 'info';
      const latencyMs = Math.round(milliseconds * 10) / 10;
      writeLine(level, { reqId, operationId, method, path, status, latencyMs, aborted });
      onFinish?.({ method, operationId, status, seconds: milliseconds / 1000 });
    };
    // 'close' comes after 'finish', or without it when the connection ends first; but a response
    // queued behind another's (pipelined) never gets the socket, and then only its request closes.
    res.once('close', logLine);
    if (res.socket === null) req.once('close', logLine);
    next();
  };
}
