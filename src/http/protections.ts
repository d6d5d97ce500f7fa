import cors from 'cors';
import type { ErrorRequestHandler, Request, RequestHandler, Response } from 'express';
import rateLimit, { ipKeyGenerator, MemoryStore, type Options } from 'express-rate-limit';
import helmet from 'helmet';
import type { Principal } from '../service/tokens-service';
import { HttpProblem } from './http-error';
import { routedOperation } from './route-gate';

const HELMET = helmet({
  contentSecurityPolicy: {
    useDefaults: false,
    directives: { defaultSrc: ["'none'"], frameAncestors: ["'none'"] },
  },
  crossOriginResourcePolicy: { policy: 'same-origin' },
  xFrameOptions: { action: 'deny' },
});

/** The headers helmet sets, worked out once: they are the same for every response. */
function helmetHeaders(): [string, string][] {
  const headers = new Map<string, string>();
  const collector = {
    setHeader: (name: string, value: string) => headers.set(name, value),
    removeHeader: (name: string) => headers.delete(name),
  };
  HELMET({} as Request, collector as unknown as Response, () => undefined);
  return [...headers];
}

/**
 * Security headers for a JSON API (helmet's, computed once at start): nothing may be framed,
 * scripted or sniffed, and no answer is cached; while the instance drains, keep-alive clients are
 * told to reconnect elsewhere. A handler that serves a page for people sets its own
 * Content-Security-Policy.
 */
export function responseHeaders(isShuttingDown: () => boolean): RequestHandler {
  const headers: [string, string][] = [...helmetHeaders(), ['Cache-Control', 'no-store']];
  return (_req, res, next) => {
    for (const [name, value] of headers) res.setHeader(name, value);
    if (isShuttingDown()) res.setHeader('Connection', 'close');
    next();
  };
}

/** CORS for the configured origins only; with none, no CORS headers and preflights answer 405. */
export function corsFor(origins: readonly string[]): RequestHandler | undefined {
  if (origins.length === 0) return undefined;
  const handler = cors({
    origin: [...origins],
    methods: ['GET', 'HEAD', 'POST', 'DELETE'],
    allowedHeaders: ['Authorization', 'Content-Type', 'X-Request-Id'],
    exposedHeaders: ['X-Request-Id', 'Retry-After', 'WWW-Authenticate', 'Allow'],
    maxAge: 600,
  });
  // Only browsers send Origin; a plain OPTIONS without it goes on to the route gate (405).
  return (req, res, next) => (req.headers.origin === undefined ? next() : handler(req, res, next));
}

/** The rate limits, as configured. */
export interface RateLimits {
  /** Failed authentications per client address and window before 429; 0 turns it off. */
  readonly authFailures: number;
  readonly authFailureWindowMs: number;
  /** Requests per token and window before 429; 0 turns it off. */
  readonly tokenRequests: number;
  readonly tokenWindowMs: number;
}

function retryAfterSeconds(resetTime: Date | undefined, windowMs: number): string {
  const ms = resetTime === undefined ? windowMs : resetTime.getTime() - Date.now();
  return String(Math.max(1, Math.ceil(ms / 1000)));
}

function tooMany(message: string, retryAfter: string): HttpProblem {
  return new HttpProblem(429, message, { 'Retry-After': retryAfter });
}

const AUTH_MESSAGE = 'Too many failed authentications from this address; try again later.';

/**
 * Limits failed authentications per client address: after `limit` 401s within `windowMs`, every
 * request from that address to a secured operation answers 429 with Retry-After until the window
 * passes, before its token is even looked at. Successful requests never count.
 */
export function authFailureLimit({ limit, windowMs }: { limit: number; windowMs: number }): {
  guard: RequestHandler;
  record: ErrorRequestHandler;
} {
  const store = new MemoryStore();
  store.init({ windowMs } as Options);
  const keyOf = (req: Request) => ipKeyGenerator(req.ip ?? req.socket.remoteAddress ?? 'unknown');
  return {
    async guard(req, res, next) {
      if (limit === 0 || routedOperation(res)?.secured !== true) return next();
      const seen = await store.get(keyOf(req));
      if (seen !== undefined && seen.totalHits >= limit) {
        throw tooMany(AUTH_MESSAGE, retryAfterSeconds(seen.resetTime, windowMs));
      }
      next();
    },
    async record(error: unknown, req, _res, next) {
      if (limit === 0 || !(error instanceof HttpProblem) || error.status !== 401)
        return next(error);
      const { totalHits, resetTime } = await store.increment(keyOf(req));
      next(
        totalHits > limit ? tooMany(AUTH_MESSAGE, retryAfterSeconds(resetTime, windowMs)) : error,
      );
    },
  };
}

/** Limits requests per token: over `limit` within `windowMs`, 429 with Retry-After. 0 turns it off. */
export function tokenRequestLimit({
  limit,
  windowMs,
}: {
  limit: number;
  windowMs: number;
}): RequestHandler | undefined {
  if (limit === 0) return undefined;
  return rateLimit({
    windowMs,
    limit,
    standardHeaders: false,
    legacyHeaders: false,
    skip: (req) => req.user === undefined,
    keyGenerator: (req) => (req.user as Principal).tokenId,
    handler: (req, _res, next) =>
      next(
        tooMany(
          'Too many requests with this token; try again later.',
          retryAfterSeconds(
            (req as Request & { rateLimit?: { resetTime?: Date } }).rateLimit?.resetTime,
            windowMs,
          ),
        ),
      ),
  });
}
