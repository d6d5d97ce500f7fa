import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RequestHandler } from 'express';
import { pinoHttp } from 'pino-http';
import type { Logger } from '../logger';
import { routedOperation } from './route-gate';

/** An incoming id is kept only when it is short and plain, so it cannot forge log lines or headers. */
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** The request's id: the caller's well-formed `X-Request-Id`, or a new UUID. */
export function requestIdOf(res: ServerResponse): string {
  return (res as { locals?: Record<string, unknown> }).locals?.['requestId'] as string;
}

/**
 * Gives every request an id, echoed in `X-Request-Id` on every response (errors included), and
 * logs one line per request: id, operationId, method, path (never the query), status, latency.
 * Headers and bodies are not logged.
 */
export function createRequestLog(logger: Logger): RequestHandler[] {
  const assignId: RequestHandler = (req, res, next) => {
    const incoming = req.headers['x-request-id'];
    const id = typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : randomUUID();
    res.locals['requestId'] = id;
    res.setHeader('X-Request-Id', id);
    next();
  };
  const log = pinoHttp({
    logger,
    genReqId: (_req: IncomingMessage, res: ServerResponse) => requestIdOf(res),
    wrapSerializers: false,
    serializers: {
      req: (req: IncomingMessage) => ({ method: req.method, path: req.url?.split('?', 1)[0] }),
      res: (res: ServerResponse) => ({ status: res.statusCode }),
    },
    customProps: (_req: IncomingMessage, res: ServerResponse) => ({
      operationId: routedOperation(res as never)?.operationId,
    }),
    // 503 is expected while the store is away or the instance drains; the operator sees it as a warning.
    customLogLevel: (_req, res, error) =>
      res.statusCode === 503
        ? 'warn'
        : error !== undefined || res.statusCode >= 500
          ? 'error'
          : 'info',
    customSuccessMessage: () => 'request',
    customErrorMessage: () => 'request',
    customAttributeKeys: { responseTime: 'latencyMs' },
    quietReqLogger: true,
  });
  return [assignId, log];
}
