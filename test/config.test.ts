import { ConfigError, parseConfig, type Config } from '../src/config';

/** The ConfigError parseConfig throws for this environment; fails the test when it returns. */
function configErrorOf(env: Record<string, string>): ConfigError {
  try {
    parseConfig(env);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return error as ConfigError;
  }
  throw new Error(`parseConfig accepted ${JSON.stringify(env)}`);
}

const DEFAULTS: Config = {
  production: false,
  host: '127.0.0.1',
  port: 8080,
  bodyLimitBytes: 65536,
  validateResponses: false,
  workers: 1,
  store: {
    kind: 'sqlite',
    path: './data/plants.sqlite',
    synchronous: 'FULL',
    busyTimeoutMs: 1000,
    syncTimeoutMs: 10_000,
  },
  log: { level: 'info', format: 'auto' },
  metrics: true,
  corsOrigins: [],
  trustProxyHops: 0,
  limits: {
    authFailures: 20,
    authFailureWindowMs: 60_000,
    tokenRequests: 0,
    tokenWindowMs: 60_000,
  },
  http: {
    headersTimeoutMs: 10_000,
    requestTimeoutMs: 30_000,
    keepAliveTimeoutMs: 5000,
    maxHeaderBytes: 16_384,
    maxConnections: 4096,
    inactivityTimeoutMs: 30_000,
    shutdownTimeoutMs: 10_000,
  },
};

describe('parseConfig', () => {
  describe('defaults', () => {
    it('returns the defaults for an empty environment', () => {
      expect(parseConfig({})).toStrictEqual(DEFAULTS);
    });

    it('ignores variables it does not know', () => {
      expect(parseConfig({ PATH: '/usr/bin', PLANTS: 'many' })).toStrictEqual(DEFAULTS);
    });

    it('returns a deeply frozen object', () => {
      const config = parseConfig({});
      expect(Object.isFrozen(config)).toBe(true);
      expect(Object.isFrozen(config.store)).toBe(true);
    });
  });

  describe('valid values', () => {
    it('reads every variable', () => {
      expect(
        parseConfig({
          NODE_ENV: 'production',
          HOST: '0.0.0.0',
          PORT: '3000',
          BODY_LIMIT_BYTES: '1024',
          VALIDATE_RESPONSES: 'true',
          SQLITE_PATH: '/var/lib/plants/plants.sqlite',
          SQLITE_SYNCHRONOUS: 'NORMAL',
          SQLITE_BUSY_TIMEOUT_MS: '250',
          SQLITE_SYNC_TIMEOUT_MS: '30000',
          WORKERS: '3',
          LOG_LEVEL: 'debug',
          LOG_FORMAT: 'json',
          METRICS: 'false',
          CORS_ORIGINS: 'https://app.example.com, http://localhost:3000',
          TRUST_PROXY_HOPS: '1',
          AUTH_FAILURE_LIMIT: '5',
          AUTH_FAILURE_WINDOW_MS: '30000',
          TOKEN_RATE_LIMIT: '600',
          TOKEN_RATE_WINDOW_MS: '1000',
          HEADERS_TIMEOUT_MS: '2000',
          REQUEST_TIMEOUT_MS: '4000',
          KEEP_ALIVE_TIMEOUT_MS: '3000',
          MAX_HEADER_BYTES: '8192',
          MAX_CONNECTIONS: '200',
          INACTIVITY_TIMEOUT_MS: '20000',
          SHUTDOWN_TIMEOUT_MS: '1500',
        }),
      ).toStrictEqual({
        production: true,
        host: '0.0.0.0',
        port: 3000,
        bodyLimitBytes: 1024,
        validateResponses: true,
        workers: 3,
        store: {
          kind: 'sqlite',
          path: '/var/lib/plants/plants.sqlite',
          synchronous: 'NORMAL',
          busyTimeoutMs: 250,
          syncTimeoutMs: 30_000,
        },
        log: { level: 'debug', format: 'json' },
        metrics: false,
        corsOrigins: ['https://app.example.com', 'http://localhost:3000'],
        trustProxyHops: 1,
        limits: {
          authFailures: 5,
          authFailureWindowMs: 30_000,
          tokenRequests: 600,
          tokenWindowMs: 1000,
        },
        http: {
          headersTimeoutMs: 2000,
          requestTimeoutMs: 4000,
          keepAliveTimeoutMs: 3000,
          maxHeaderBytes: 8192,
          maxConnections: 200,
          inactivityTimeoutMs: 20_000,
          shutdownTimeoutMs: 1500,
        },
      });
    });

    it('lists every invalid operational setting together', () => {
      const error = configErrorOf({
        LOG_LEVEL: 'loud',
        CORS_ORIGINS: 'https://ok.example.com,not-an-origin,https://x.example.com/path',
        HEADERS_TIMEOUT_MS: '10',
        METRICS: 'maybe',
      });
      expect(error.problems).toHaveLength(5);
      for (const name of [
        'LOG_LEVEL',
        'not-an-origin',
        'https://x.example.com/path',
        'HEADERS_TIMEOUT_MS',
        'METRICS',
      ]) {
        expect(error.message).toContain(name);
      }
    });

    it.each([
      ['production', true],
      ['development', false],
      ['test', false],
      ['', false],
      // Any other value fails closed: production's refusal instead of a printed development token.
      ['prod', true],
      ['Production', true],
      ['staging', true],
      ['dev', true],
    ])('sets production from NODE_ENV=%j to %p', (value, production) => {
      expect(parseConfig({ NODE_ENV: value }).production).toBe(production);
    });

    it.each([
      ['0', 0],
      ['1', 1],
      ['65535', 65535],
    ])('accepts PORT=%s as %i', (value, port) => {
      expect(parseConfig({ PORT: value }).port).toBe(port);
    });

    it.each([
      ['1', 1],
      ['16777216', 16 * 1024 * 1024],
    ])('accepts BODY_LIMIT_BYTES=%s as %i', (value, bytes) => {
      expect(parseConfig({ BODY_LIMIT_BYTES: value }).bodyLimitBytes).toBe(bytes);
    });

    it.each([
      ['FULL', 'FULL'],
      ['NORMAL', 'NORMAL'],
      ['normal', 'NORMAL'],
    ])('accepts SQLITE_SYNCHRONOUS=%s as %s', (value, synchronous) => {
      expect(parseConfig({ SQLITE_SYNCHRONOUS: value }).store).toMatchObject({ synchronous });
    });

    it('reads SQLITE_SYNC_TIMEOUT_MS=0 as no deadline for the WAL sync, and refuses -1 and 999', () => {
      expect(parseConfig({ SQLITE_SYNC_TIMEOUT_MS: '0' }).store).toMatchObject({
        syncTimeoutMs: 0,
      });
      expect(configErrorOf({ SQLITE_SYNC_TIMEOUT_MS: '-1' }).problems).toStrictEqual([
        'SQLITE_SYNC_TIMEOUT_MS must be an integer from 0 to 600000, not "-1"',
      ]);
      expect(configErrorOf({ SQLITE_SYNC_TIMEOUT_MS: '999' }).problems).toStrictEqual([
        'SQLITE_SYNC_TIMEOUT_MS must be 0 (no deadline) or from 1000 to 600000, not "999"',
      ]);
    });

    it.each([
      ['true', true],
      ['false', false],
      ['TRUE', true],
    ])('accepts VALIDATE_RESPONSES=%s as %p', (value, validateResponses) => {
      expect(parseConfig({ VALIDATE_RESPONSES: value }).validateResponses).toBe(validateResponses);
    });
  });

  describe('invalid values', () => {
    it.each([
      ['PORT', 'abc', 'PORT must be an integer from 0 to 65535, not "abc"'],
      ['PORT', '-1', 'PORT must be an integer from 0 to 65535, not "-1"'],
      ['PORT', '65536', 'PORT must be an integer from 0 to 65535, not "65536"'],
      ['PORT', '8080.5', 'PORT must be an integer from 0 to 65535, not "8080.5"'],
      ['PORT', '', 'PORT must be an integer from 0 to 65535, not ""'],
      ['BODY_LIMIT_BYTES', '0', 'BODY_LIMIT_BYTES must be an integer from 1 to 16777216, not "0"'],
      [
        'PORT',
        '08080',
        'PORT must be an integer from 0 to 65535 without leading zeros, not "08080"',
      ],
      ['WORKERS', '00', 'WORKERS must be an integer from 1 to 64 without leading zeros, not "00"'],
      ['CORS_ORIGINS', ' , ', 'CORS_ORIGINS must list at least one origin'],
      ['CORS_ORIGINS', ',', 'CORS_ORIGINS must list at least one origin'],
      ['CORS_ORIGINS', '', 'CORS_ORIGINS must not be empty'],
      ['SQLITE_SYNCHRONOUS', 'OFF', 'SQLITE_SYNCHRONOUS must be one of FULL, NORMAL, not "OFF"'],
      ['VALIDATE_RESPONSES', 'yes', 'VALIDATE_RESPONSES must be one of true, false, not "yes"'],
      ['SQLITE_PATH', '', 'SQLITE_PATH must not be empty'],
      ['SQLITE_PATH', ':memory:', 'SQLITE_PATH must be a file, not ":memory:"'],
      ['HOST', '  ', 'HOST must not be empty'],
      ['HOST', '256.1.1.1', 'HOST must be an IP address or a host name, not "256.1.1.1"'],
      ['HOST', 'localhost ', 'HOST must be an IP address or a host name, not "localhost "'],
      ['HOST', 'web-.internal', 'HOST must be an IP address or a host name, not "web-.internal"'],
      [
        'KEEP_ALIVE_TIMEOUT_MS',
        '999',
        'KEEP_ALIVE_TIMEOUT_MS must be an integer from 1000 to 600000, not "999"',
      ],
      ['MAX_CONNECTIONS', '0', 'MAX_CONNECTIONS must be an integer from 1 to 1000000, not "0"'],
      [
        'INACTIVITY_TIMEOUT_MS',
        '999',
        'INACTIVITY_TIMEOUT_MS must be an integer from 1000 to 600000, not "999"',
      ],
      [
        'REQUEST_TIMEOUT_MS',
        '5000',
        'HEADERS_TIMEOUT_MS (10000) must not exceed REQUEST_TIMEOUT_MS (5000)',
      ],
    ])('rejects %s=%j with a ConfigError naming the problem', (name, value, problem) => {
      const error = configErrorOf({ [name]: value });

      expect(error.problems).toStrictEqual([problem]);
      expect(error.message).toBe(`Invalid configuration:\n  - ${problem}`);
      expect(error.name).toBe('ConfigError');
    });

    it.each(['localhost', '::1', 'fe80::1%eth0', 'plants_db.internal.', '0.0.0.0'])(
      'takes HOST=%j, an address or a host name',
      (host) => {
        expect(parseConfig({ HOST: host }).host).toBe(host);
      },
    );

    it('takes headers and request time-outs that are equal', () => {
      const { http } = parseConfig({ HEADERS_TIMEOUT_MS: '5000', REQUEST_TIMEOUT_MS: '5000' });

      expect(http).toMatchObject({ headersTimeoutMs: 5000, requestTimeoutMs: 5000 });
    });

    it('lists every invalid value in one ConfigError', () => {
      const error = configErrorOf({
        PORT: 'abc',
        BODY_LIMIT_BYTES: '0',
        SQLITE_SYNCHRONOUS: 'OFF',
        VALIDATE_RESPONSES: 'yes',
        SQLITE_PATH: '',
        HOST: '127.0.0.1',
      });

      expect(error.problems).toHaveLength(5);
      for (const name of [
        'PORT',
        'BODY_LIMIT_BYTES',
        'SQLITE_SYNCHRONOUS',
        'VALIDATE_RESPONSES',
        'SQLITE_PATH',
      ]) {
        expect(error.message).toContain(`  - ${name} must`);
      }
    });
  });

  describe('the store', () => {
    it('selects PostgreSQL with its defaults when DATABASE_URL is set', () => {
      expect(
        parseConfig({ DATABASE_URL: 'postgres://app@db.internal:5432/plants' }).store,
      ).toStrictEqual({
        kind: 'postgres',
        url: 'postgres://app@db.internal:5432/plants',
        poolSize: 10,
        connectTimeoutMs: 2000,
        statementTimeoutMs: 5000,
      });
    });

    it('reads the PostgreSQL pool settings', () => {
      const env = {
        DATABASE_URL: 'postgresql://db/plants',
        PG_POOL_SIZE: '25',
        PG_CONNECT_TIMEOUT_MS: '500',
        PG_STATEMENT_TIMEOUT_MS: '1500',
      };
      expect(parseConfig(env).store).toMatchObject({
        poolSize: 25,
        connectTimeoutMs: 500,
        statementTimeoutMs: 1500,
      });
    });

    it('reads PG_STATEMENT_TIMEOUT_MS=0 as no time-out of its own (the server sets it), and refuses -1', () => {
      const env = { DATABASE_URL: 'postgresql://db/plants', PG_STATEMENT_TIMEOUT_MS: '0' };
      expect(parseConfig(env).store).toMatchObject({ statementTimeoutMs: 0 });
      expect(configErrorOf({ ...env, PG_STATEMENT_TIMEOUT_MS: '-1' }).problems).toStrictEqual([
        'PG_STATEMENT_TIMEOUT_MS must be an integer from 0 to 600000, not "-1"',
      ]);
    });

    it.each([
      'postgres://app:secret@db.internal:99999/plants',
      'postgres://app:secret@db internal/plants',
    ])(
      'refuses DATABASE_URL=%j, an invalid URL, naming the variable but not the password',
      (url) => {
        const error = configErrorOf({ DATABASE_URL: url });

        expect(error.problems).toStrictEqual([
          'DATABASE_URL must be a valid URL like postgres://user:password@host:5432/db (its value is not shown)',
        ]);
        expect(error.message).not.toContain('secret');
      },
    );

    it('takes a DATABASE_URL without a host, whose socket directory is in its query', () => {
      const url = 'postgres://app@/plants?host=/var/run/postgresql';

      expect(parseConfig({ DATABASE_URL: url }).store).toMatchObject({ kind: 'postgres', url });
    });

    it('reads WORKERS', () => {
      expect(parseConfig({ WORKERS: '4' }).workers).toBe(4);
    });

    it("takes any INACTIVITY_TIMEOUT_MS with any store's time-outs: a wait for the store is the server's", () => {
      const config = parseConfig({
        DATABASE_URL: 'postgres://app@db.internal:5432/plants',
        INACTIVITY_TIMEOUT_MS: '1000',
        PG_CONNECT_TIMEOUT_MS: '600000',
        PG_STATEMENT_TIMEOUT_MS: '600000',
      });

      expect(config.store).toMatchObject({
        connectTimeoutMs: 600_000,
        statementTimeoutMs: 600_000,
      });
      expect(config.http.inactivityTimeoutMs).toBe(1000);
    });

    it('lists every invalid PostgreSQL setting together', () => {
      const error = configErrorOf({
        DATABASE_URL: 'mysql://db/plants',
        PG_POOL_SIZE: '0',
        PG_CONNECT_TIMEOUT_MS: 'soon',
        WORKERS: '0',
      });
      expect(error.problems).toHaveLength(4);
      for (const name of ['DATABASE_URL', 'PG_POOL_SIZE', 'PG_CONNECT_TIMEOUT_MS', 'WORKERS']) {
        expect(error.message).toContain(name);
      }
    });
  });
});
