import { isIP } from 'node:net';
import type { RateLimits } from './http/protections';
import type { LogLevel } from './logger';
import type { PostgresStoreOptions } from './store/postgres/postgres-plant-store';
import type { SqliteStoreOptions, SqliteSynchronous } from './store/sqlite/sqlite-plant-store';

/** The store to open: the embedded SQLite file by default, PostgreSQL when DATABASE_URL is set. */
export type StoreConfig =
  | ({ readonly kind: 'sqlite' } & SqliteStoreOptions)
  | ({ readonly kind: 'postgres' } & PostgresStoreOptions);

/** Everything the service reads from its environment, checked once at start. */
export interface Config {
  readonly production: boolean;
  readonly host: string;
  readonly port: number;
  readonly bodyLimitBytes: number;
  readonly validateResponses: boolean;
  /** Worker processes to serve from (node:cluster); 1 serves from the main process. */
  readonly workers: number;
  readonly store: StoreConfig;
  readonly log: { readonly level: LogLevel; readonly format: 'auto' | 'json' | 'pretty' };
  /** Serve Prometheus metrics at GET /metrics. */
  readonly metrics: boolean;
  /** Origins allowed to call the API from a browser; empty turns CORS off. */
  readonly corsOrigins: readonly string[];
  /** Proxy hops in front of the service whose X-Forwarded-For is trusted for the client address. */
  readonly trustProxyHops: number;
  readonly limits: RateLimits;
  readonly http: HttpServerConfig;
}

/** Time-outs and limits of the HTTP server itself. */
export interface HttpServerConfig {
  readonly headersTimeoutMs: number;
  readonly requestTimeoutMs: number;
  readonly keepAliveTimeoutMs: number;
  readonly maxHeaderBytes: number;
  /** Connections open at once, at most; the server closes more as they come (limitConnections). */
  readonly maxConnections: number;
  /** How long a connection with a request in progress may go without a byte read or written. */
  readonly inactivityTimeoutMs: number;
  /** How long in-flight requests may run after SIGTERM before their connections are closed. */
  readonly shutdownTimeoutMs: number;
}

/** Thrown by parseConfig with every problem found, one per line. */
export class ConfigError extends Error {
  constructor(readonly problems: readonly string[]) {
    super(`Invalid configuration:\n${problems.map((problem) => `  - ${problem}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

type Env = Readonly<Record<string, string | undefined>>;

class Reader {
  readonly problems: string[] = [];
  constructor(private readonly env: Env) {}

  optional(name: string): string | undefined {
    return this.env[name] === undefined ? undefined : this.string(name, '');
  }

  string(name: string, fallback: string): string {
    const value = this.env[name];
    if (value === undefined) return fallback;
    if (value.trim() === '') this.problems.push(`${name} must not be empty`);
    return value;
  }

  integer(name: string, fallback: number, min: number, max: number): number {
    const value = this.env[name];
    if (value === undefined) return fallback;
    // Decimal digits without a leading zero: "010" could be meant as octal or as ten.
    if (/^0\d+$/.test(value)) {
      this.problems.push(
        `${name} must be an integer from ${min} to ${max} without leading zeros, not "${value}"`,
      );
      return fallback;
    }
    if (!/^\d+$/.test(value) || Number(value) < min || Number(value) > max) {
      this.problems.push(`${name} must be an integer from ${min} to ${max}, not "${value}"`);
      return fallback;
    }
    return Number(value);
  }

  oneOf<T extends string>(name: string, fallback: T, allowed: readonly T[]): T {
    const value = this.env[name];
    if (value === undefined) return fallback;
    const match = allowed.find((candidate) => candidate.toLowerCase() === value.toLowerCase());
    if (match === undefined)
      this.problems.push(`${name} must be one of ${allowed.join(', ')}, not "${value}"`);
    return match ?? fallback;
  }

  boolean(name: string, fallback: boolean): boolean {
    return this.oneOf(name, fallback ? 'true' : 'false', ['true', 'false']) === 'true';
  }
}

function readOrigins(read: Reader): string[] {
  const value = read.optional('CORS_ORIGINS');
  if (value === undefined) return [];
  const origins = value
    .split(',')
    .map((origin) => origin.trim())
    .filter((origin) => origin !== '');
  // Only commas and spaces: the same mistake as an empty value, which string() already refused.
  if (origins.length === 0 && value.trim() !== '') {
    read.problems.push('CORS_ORIGINS must list at least one origin');
  }
  for (const origin of origins) {
    let valid = false;
    try {
      valid = /^https?:$/.test(new URL(origin).protocol) && new URL(origin).origin === origin;
    } catch {
      valid = false;
    }
    if (!valid)
      read.problems.push(
        `CORS_ORIGINS must list origins like https://app.example.com, not "${origin}"`,
      );
  }
  return origins;
}

function readStore(read: Reader): StoreConfig {
  const url = read.optional('DATABASE_URL');
  const postgres = {
    poolSize: read.integer('PG_POOL_SIZE', 10, 1, 1000),
    connectTimeoutMs: read.integer('PG_CONNECT_TIMEOUT_MS', 2000, 1, 600_000),
    statementTimeoutMs: read.integer('PG_STATEMENT_TIMEOUT_MS', 5000, 0, 600_000),
  };
  const sqlite = {
    path: read.string('SQLITE_PATH', './data/plants.sqlite'),
    synchronous: read.oneOf<SqliteSynchronous>('SQLITE_SYNCHRONOUS', 'FULL', ['FULL', 'NORMAL']),
    busyTimeoutMs: read.integer('SQLITE_BUSY_TIMEOUT_MS', 1000, 0, 60_000),
    syncTimeoutMs: read.integer('SQLITE_SYNC_TIMEOUT_MS', 10_000, 0, 600_000),
  };
  // Shorter, a healthy disk's slow moment would stop the store.
  if (sqlite.syncTimeoutMs > 0 && sqlite.syncTimeoutMs < 1000) {
    read.problems.push(
      `SQLITE_SYNC_TIMEOUT_MS must be 0 (no deadline) or from 1000 to 600000, not "${sqlite.syncTimeoutMs}"`,
    );
  }
  // An in-memory database cannot be in WAL mode, which the group commit syncs (see the store).
  if (sqlite.path === ':memory:') read.problems.push('SQLITE_PATH must be a file, not ":memory:"');
  if (url === undefined) return { kind: 'sqlite', ...sqlite };
  if (!/^postgres(ql)?:\/\//.test(url)) {
    read.problems.push('DATABASE_URL must be a postgres:// or postgresql:// URL');
  } else if (!URL.canParse(url) && !URL.canParse(url.replace('@/', '@host/'))) {
    // What the driver would refuse only when it connects, as a bare "Invalid URL". It too takes
    // `user@/db?host=/socket/dir`, with no host. The value is not shown: it may hold a password.
    read.problems.push(
      'DATABASE_URL must be a valid URL like postgres://user:password@host:5432/db (its value is not shown)',
    );
  }
  return { kind: 'postgres', url, ...postgres };
}

/** A label of a host name: letters, digits and inner `-` (RFC 1123), and `_` as container names have. */
const HOST_LABEL = /^[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?$/;

function isHostName(host: string): boolean {
  const name = host.endsWith('.') ? host.slice(0, -1) : host;
  return name.length <= 253 && name.split('.').every((label) => HOST_LABEL.test(label));
}

/**
 * HOST, checked here with the other settings: listen() would find it unusable only after the store
 * was opened. A name of digits and dots only is a mistyped IPv4 address (`256.1.1.1`), not a name.
 */
function readHost(read: Reader): string {
  const host = read.string('HOST', '127.0.0.1');
  if (host.trim() === '' || isIP(host) !== 0) return host;
  if (!isHostName(host) || /^[\d.]+$/.test(host)) {
    read.problems.push(`HOST must be an IP address or a host name, not "${host}"`);
  }
  return host;
}

/** MAX_CONNECTIONS's default; README's "Time-outs and limits of the HTTP server" says what it costs. */
const MAX_CONNECTIONS_DEFAULT = 4096;

function readHttpServer(read: Reader): HttpServerConfig {
  const http = {
    headersTimeoutMs: read.integer('HEADERS_TIMEOUT_MS', 10_000, 100, 600_000),
    requestTimeoutMs: read.integer('REQUEST_TIMEOUT_MS', 30_000, 100, 600_000),
    // At least a second: node:http advertises it as `Keep-Alive: timeout=<whole seconds>`.
    keepAliveTimeoutMs: read.integer('KEEP_ALIVE_TIMEOUT_MS', 5000, 1000, 600_000),
    maxHeaderBytes: read.integer('MAX_HEADER_BYTES', 16 * 1024, 1024, 1024 * 1024),
    maxConnections: read.integer('MAX_CONNECTIONS', MAX_CONNECTIONS_DEFAULT, 1, 1_000_000),
    inactivityTimeoutMs: read.integer('INACTIVITY_TIMEOUT_MS', 30_000, 1000, 600_000),
    shutdownTimeoutMs: read.integer('SHUTDOWN_TIMEOUT_MS', 10_000, 0, 600_000),
  };
  // The headers are part of the request, and node:http refuses to start otherwise.
  if (http.headersTimeoutMs > http.requestTimeoutMs) {
    read.problems.push(
      `HEADERS_TIMEOUT_MS (${http.headersTimeoutMs}) must not exceed REQUEST_TIMEOUT_MS (${http.requestTimeoutMs})`,
    );
  }
  return http;
}

/**
 * NODE_ENV values of a developer's machine. Any other value counts as production, so that a
 * misspelt or site-specific name ("prod", "Production", "staging") fails closed: no development
 * token is created and printed to its logs.
 */
const DEVELOPMENT_ENVIRONMENTS: ReadonlySet<string> = new Set(['', 'development', 'test']);

/** Parses the environment; throws a ConfigError that lists every invalid value at once. */
export function parseConfig(env: Env): Config {
  const read = new Reader(env);
  const config: Config = {
    production: !DEVELOPMENT_ENVIRONMENTS.has(env['NODE_ENV'] ?? ''),
    host: readHost(read),
    port: read.integer('PORT', 8080, 0, 65535),
    bodyLimitBytes: read.integer('BODY_LIMIT_BYTES', 64 * 1024, 1, 16 * 1024 * 1024),
    validateResponses: read.boolean('VALIDATE_RESPONSES', false),
    workers: read.integer('WORKERS', 1, 1, 64),
    store: Object.freeze(readStore(read)),
    log: Object.freeze({
      level: read.oneOf<LogLevel>('LOG_LEVEL', 'info', [
        'fatal',
        'error',
        'warn',
        'info',
        'debug',
        'trace',
        'silent',
      ]),
      format: read.oneOf('LOG_FORMAT', 'auto', ['auto', 'json', 'pretty'] as const),
    }),
    metrics: read.boolean('METRICS', true),
    corsOrigins: Object.freeze(readOrigins(read)),
    trustProxyHops: read.integer('TRUST_PROXY_HOPS', 0, 0, 10),
    limits: Object.freeze({
      authFailures: read.integer('AUTH_FAILURE_LIMIT', 20, 0, 1_000_000),
      authFailureWindowMs: read.integer('AUTH_FAILURE_WINDOW_MS', 60_000, 1000, 86_400_000),
      tokenRequests: read.integer('TOKEN_RATE_LIMIT', 0, 0, 100_000_000),
      tokenWindowMs: read.integer('TOKEN_RATE_WINDOW_MS', 60_000, 1000, 86_400_000),
    }),
    http: Object.freeze(readHttpServer(read)),
  };
  if (read.problems.length > 0) throw new ConfigError(read.problems);
  return Object.freeze(config);
}
