import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { RequestHandler } from 'express';
import type { Logger } from '../logger';
import { routedOperation } from './route-gate';

/** An incoming id is kept only when it is short and plain, so it cannot forge log lines or headers. */
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** The request's id: the caller's well-formed `X-Request-Id`, or a new UUID. */
export function requestIdOf(res: ServerResponse): string {
  return (res as { locals?: Record<string, unknown> }).locals?.['requestId'] as string;
}

/** What is known of a request once its response is written. */
export interface FinishedRequest {
  readonly method: string;
  /** The contract operation it was routed to, if any. */
  readonly operationId: string | undefined;
  readonly status: number;
  readonly seconds: number;
}

/**
 * Gives every request an id, echoed in `X-Request-Id` on every response (errors included), and
 * when the response is written logs one line: id, operationId, method, path (never the query),
 * status, latency; headers and bodies are never logged. `onFinish` (the metrics) hears of the same
 * moment. One listener per request and no per-request child logger: pino-http's child logger was
 * a fifth of a request's time under load (see README, "Performance").
 */
export function createRequestLog(
  logger: Logger,
  onFinish?: (request: FinishedRequest) => void,
): RequestHandler {
  return (req, res, next) => {
    const started = process.hrtime.bigint();
    const incoming = req.headers['x-request-id'];
    const id = typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : randomUUID();
    // Kept now: the route gate serves HEAD as GET, and the log shows what the client sent.
    const method = req.method;
    const path = req.url.split('?', 1)[0];
    res.locals['requestId'] = id;
    res.setHeader('X-Request-Id', id);
    res.once('finish', () => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const status = res.statusCode;
      const operationId = routedOperation(res)?.operationId;
      // 503 is expected while the store is away or the instance drains: a warning, not an error.
      const level = status === 503 ? 'warn' : status >= 500 ? 'error' : 'info';
      logger[level](
        {
          reqId: id,
          operationId,
          req: { method, path },
          res: { status },
          latencyMs: Math.round(seconds * 1e4) / 10,
        },
        'request',
      );
      onFinish?.({ method, operationId, status, seconds });
    });
    next();
  };
}
