import cors from 'cors';
import type { Request, RequestHandler, Response } from 'express';
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

/** CORS for the configured origins; see corsFor. */
export interface Cors {
  /** Gives an actual (not preflight) request from a configured origin the CORS headers. */
  readonly headers: RequestHandler;
  /**
   * Answers a CORS preflight (OPTIONS with Origin and Access-Control-Request-Method) from a
   * configured origin to a resource that allows `methods`, with 204; false for any other request,
   * which goes on to be routed.
   */
  answerPreflight(req: Request, res: Response, methods: string): boolean;
}

const CORS_ALLOWED_HEADERS = 'Authorization,Content-Type,X-Request-Id';
const CORS_MAX_AGE_SECONDS = '600';

/**
 * CORS for the configured origins only; with none, no CORS headers, and an OPTIONS answers 405.
 * A preflight is answered by the route gate, once the path is known to exist, with that path's
 * methods: a preflight to a path the contract does not have answers 404, one from an origin not
 * configured 405 (what any OPTIONS gets), as does an OPTIONS that is not a preflight.
 */
export function corsFor(origins: readonly string[]): Cors | undefined {
  if (origins.length === 0) return undefined;
  const allowed = new Set(origins);
  const actual = cors({
    origin: [...origins],
    exposedHeaders: ['X-Request-Id', 'Retry-After', 'WWW-Authenticate', 'Allow'],
  });
  return {
    // Only browsers send Origin; OPTIONS goes on to the route gate, which answers preflights.
    headers: (req, res, next) =>
      req.headers.origin === undefined || req.method === 'OPTIONS'
        ? next()
        : actual(req, res, next),
    answerPreflight(req, res, methods) {
      const { origin } = req.headers;
      if (
        req.method !== 'OPTIONS' ||
        origin === undefined ||
        !req.headers['access-control-request-method'] ||
        !allowed.has(origin)
      ) {
        return false;
      }
      res.setHeader('Access-Control-Allow-Origin', origin);
      res.vary('Origin');
      res.setHeader('Access-Control-Allow-Methods', methods);
      res.setHeader('Access-Control-Allow-Headers', CORS_ALLOWED_HEADERS);
      res.setHeader('Access-Control-Max-Age', CORS_MAX_AGE_SECONDS);
      res.setHeader('Content-Length', '0');
      res.status(204).end();
      return true;
    },
  };
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

/** Whole seconds (at least 1) from `now` until `until`, both in ms since the epoch. */
function retryAfterSeconds(until: number, now = Date.now()): string {
  return String(Math.max(1, Math.ceil((until - now) / 1000)));
}

function tooMany(message: string, retryAfter: string): HttpProblem {
  return new HttpProblem(429, message, { 'Retry-After': retryAfter });
}

const AUTH_MESSAGE = 'Too many failed authentications from this address; try again later.';

/**
 * Limits failed authentications per client address: once an address has had `limit` 401s within
 * `windowMs`, every request from it to a secured operation answers 429 with Retry-After until its
 * window passes, before its token is even looked at. Successful requests never count. The counting
 * is express-rate-limit's store, on the failure path only; the check every request makes is a
 * synchronous look-up of the addresses currently blocked, skipped while none is.
 */
export function authFailureLimit({ limit, windowMs }: { limit: number; windowMs: number }): {
  /** Wraps authentication: checks the address before it, counts its 401s after it. */
  around(authenticate: RequestHandler): RequestHandler;
} {
  const store = new MemoryStore();
  store.init({ windowMs } as Options);
  /** Blocked addresses and when each may try again (ms since the epoch). */
  const blocked = new Map<string, number>();
  const keyOf = (req: Request) => ipKeyGenerator(req.ip ?? req.socket.remoteAddress ?? 'unknown');
  const blockedUntil = (key: string, now: number): number | undefined => {
    const until = blocked.get(key);
    if (until === undefined || until > now) return until;
    blocked.delete(key);
    return undefined;
  };
  const block = (key: string, until: number, now: number) => {
    // Bounded by the addresses that failed `limit` times within one window; expired ones go first.
    if (blocked.size >= 10_000) for (const [k, u] of blocked) if (u <= now) blocked.delete(k);
    blocked.set(key, until);
  };
  return {
    around(authenticate) {
      if (limit === 0) return authenticate;
      return (req, res, next) => {
        if (routedOperation(res)?.secured !== true) return next();
        if (blocked.size > 0) {
          const now = Date.now();
          const until = blockedUntil(keyOf(req), now);
          if (until !== undefined) throw tooMany(AUTH_MESSAGE, retryAfterSeconds(until, now));
        }
        return authenticate(req, res, (error?: unknown) => {
          if (!(error instanceof HttpProblem) || error.status !== 401) return next(error);
          const key = keyOf(req);
          store.increment(key).then(({ totalHits, resetTime }) => {
            const now = Date.now();
            const until = resetTime?.getTime() ?? now + windowMs;
            if (totalHits >= limit) block(key, until, now);
            next(totalHits > limit ? tooMany(AUTH_MESSAGE, retryAfterSeconds(until, now)) : error);
          }, next);
        });
      };
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
            (
              req as Request & { rateLimit?: { resetTime?: Date } }
            ).rateLimit?.resetTime?.getTime() ?? Date.now() + windowMs,
          ),
        ),
      ),
  });
}
