import { isIP } from 'node:net';
import cors from 'cors';
import type { Request, RequestHandler, Response } from 'express';
import { ipKeyGenerator } from 'express-rate-limit';
import helmet from 'helmet';
import type { Principal } from '../service/tokens-service';
import { ExpiringMap } from '../expiring-map';
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
      // No Content-Length: RFC 9110 section 8.6 forbids it in a 204, and node:http adds none.
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
 * Hits per key in fixed windows of `windowMs`, counted synchronously, so that each of a burst of
 * requests (pipelined in one read, or arriving together) sees its own count: a store that answers
 * through a promise hands each its count only after the whole burst has been counted.
 */
class WindowCounts {
  private readonly windows = new ExpiringMap<{ hits: number; endsAt: number }>(
    (window) => window.endsAt,
  );
  constructor(private readonly windowMs: number) {}

  /** Counts a hit for `key` at `now`: the hits of its window so far, and when that window ends. */
  hit(key: string, now: number): { readonly hits: number; readonly endsAt: number } {
    let window = this.windows.get(key);
    if (window === undefined || window.endsAt <= now) {
      window = { hits: 0, endsAt: now + this.windowMs };
      this.windows.set(key, window, now);
    }
    window.hits++;
    return { hits: window.hits, endsAt: window.endsAt };
  }
}

/** The key of every client address that is not an IP address. */
const NOT_AN_ADDRESS = 'not-an-address';

/**
 * A client address as the key of its failures: a port that a proxy wrote after it (`10.0.0.1:1234`,
 * `[2001:db8::1]:443`) is dropped, IPv6 addresses count by /56 (express-rate-limit's
 * ipKeyGenerator), and whatever is not an IP address (a proxy that passes on a client's own
 * X-Forwarded-For) shares one key, so that no spelling of an address makes a new client.
 */
function clientKey(address: string | undefined): string {
  let ip = address ?? '';
  const bracketed = /^\[([^\]]*)\](?::\d+)?$/.exec(ip);
  if (bracketed !== null) ip = bracketed[1]!;
  else if (/^[\d.]+:\d+$/.test(ip)) ip = ip.slice(0, ip.lastIndexOf(':'));
  return isIP(ip) === 0 ? NOT_AN_ADDRESS : ipKeyGenerator(ip);
}

/**
 * Limits failed authentications per client address: once an address has had `limit` 401s within
 * `windowMs`, every request from it to a secured operation answers 429 with Retry-After until its
 * window passes, before its token is even looked at. Successful requests never count. The check
 * every request makes is a synchronous look-up of the addresses currently blocked, skipped while
 * none is; a request that passed it before its address was blocked (read together with the
 * failures that blocked it, as pipelined requests are) is checked again once authenticated and
 * answers 429 too, so a guess past the limit learns nothing.
 */
export function authFailureLimit({ limit, windowMs }: { limit: number; windowMs: number }): {
  /** Wraps authentication: checks the address before it, counts its 401s after it. */
  around(authenticate: RequestHandler): RequestHandler;
} {
  const failures = new WindowCounts(windowMs);
  /** Blocked addresses and when each may try again (ms since the epoch). */
  const blocked = new ExpiringMap<number>((blockedUntil) => blockedUntil);
  const keyOf = (req: Request) => clientKey(req.ip ?? req.socket.remoteAddress);
  /** The 429 for a blocked address, or undefined. */
  const refusal = (req: Request): HttpProblem | undefined => {
    if (blocked.size === 0) return undefined;
    const key = keyOf(req);
    const until = blocked.get(key);
    if (until === undefined) return undefined;
    const now = Date.now();
    if (until > now) return tooMany(AUTH_MESSAGE, retryAfterSeconds(until, now));
    blocked.delete(key);
    return undefined;
  };
  return {
    around(authenticate) {
      if (limit === 0) return authenticate;
      return (req, res, next) => {
        if (routedOperation(res)?.secured !== true) return next();
        const refused = refusal(req);
        if (refused !== undefined) throw refused;
        return authenticate(req, res, (error?: unknown) => {
          if (!(error instanceof HttpProblem) || error.status !== 401) {
            return next(error === undefined ? refusal(req) : error);
          }
          const key = keyOf(req);
          const now = Date.now();
          const { hits, endsAt } = failures.hit(key, now);
          if (hits >= limit) blocked.set(key, endsAt, now);
          next(hits > limit ? tooMany(AUTH_MESSAGE, retryAfterSeconds(endsAt, now)) : error);
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
  const requests = new WindowCounts(windowMs);
  return (req, _res, next) => {
    if (req.user === undefined) return next();
    const now = Date.now();
    const { hits, endsAt } = requests.hit((req.user as Principal).tokenId, now);
    if (hits > limit) {
      throw tooMany(
        'Too many requests with this token; try again later.',
        retryAfterSeconds(endsAt, now),
      );
    }
    next();
  };
}
