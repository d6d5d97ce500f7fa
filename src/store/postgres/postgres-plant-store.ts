import pg from 'pg';
import { shownPlant, type NewPlant, type PlantStore, type TokenRecord } from '../plant-store';
import { reportingUnavailable } from '../unavailable';
import { checkEncoding } from './check-encoding';
import { postgresMigrations } from './migrations';
import { createBatcher, type BatcherOptions } from '../batcher';

export interface PostgresStoreOptions {
  readonly url: string;
  readonly poolSize: number;
  readonly connectTimeoutMs: number;
  /**
   * The server-side `statement_timeout`, sent when each connection starts. 0 sends none: the
   * role's or database's applies (PgBouncer refuses the start-up parameter), and the store refuses
   * to open when there is none.
   */
  readonly statementTimeoutMs: number;
  /**
   * Hears of each idle connection of the pool whose server went away (a restart, a fail-over, a
   * connection cut by a proxy): the pool drops it and opens another when a statement needs one.
   */
  readonly onIdleConnectionLost?: ((error: Error) => void) | undefined;
}

/** Any 64-bit key; every instance that migrates the same database takes the same lock. */
const MIGRATION_LOCK_KEY = '7305854871216940032';

/**
 * SQLSTATE classes and codes that mean "not now" rather than "never": connection loss (08),
 * shutdown, overload and operator intervention (class 57 but 57P04, the database dropped), a
 * statement or lock time-out (57014, 55P03), conflicts (40001, 40P01), the server's own I/O or
 * system failure (58000, 58030; not 58P01 or 58P02, files missing or in the way), and a database
 * that cannot take writes now (25006: a standby after a failover, or read-only by setting).
 */
const UNAVAILABLE_SQLSTATE = /^(08|53|57(?!P04)|58000|58030|40001|40P01|25006|55P03)/;

/** Errors of the network or of the name look-up, whatever the call. */
const UNAVAILABLE_ERRNO = /^E(CONN|HOST|NET|PIPE|TIMEDOUT|AI_AGAIN|NOTFOUND)/;

/**
 * Errors of connecting to a Unix socket (`host=/dir` in the URL) that mean the server is down or
 * overloaded: ENOENT, no socket file, as while PostgreSQL is stopped; EAGAIN, its listen queue
 * full (Linux). ECONNREFUSED, a socket file left without a server, is in UNAVAILABLE_ERRNO. Not
 * EACCES or ENOTDIR: the path or its permissions are wrong, which waiting does not mend.
 */
const UNAVAILABLE_SOCKET_CONNECT = /^(ENOENT|EAGAIN)$/;

/**
 * ping found its session read-only (a standby, or `default_transaction_read_only` on): what a write
 * would fail with, read_only_sql_transaction.
 */
class ReadOnlySessionError extends Error {
  readonly code = '25006';
  constructor() {
    super('The PostgreSQL session is read-only (a standby, or default_transaction_read_only).');
    this.name = 'ReadOnlySessionError';
  }
}

/** Whether a failure of the pool or of a statement is of the moment (503) rather than a bug (500). */
export function isUnavailable(error: unknown): boolean {
  const { code, message, syscall } = error as {
    code?: unknown;
    message?: unknown;
    syscall?: unknown;
  };
  if (typeof code === 'string') {
    if (UNAVAILABLE_SQLSTATE.test(code)) return true;
    if (UNAVAILABLE_ERRNO.test(code)) return true;
    if (syscall === 'connect' && UNAVAILABLE_SOCKET_CONNECT.test(code)) return true;
  }
  // node-postgres reports its own time-outs and dropped connections without a code.
  return (
    typeof message === 'string' &&
    /Connection terminated|timeout|Client has encountered a connection error/i.test(message)
  );
}

interface TokenRow {
  id: string;
  name: string;
  created_at: Date;
  last_used_at: Date | null;
  revoked_at: Date | null;
}

function tokenRowToRecord(row: TokenRow): TokenRecord {
  return {
    id: row.id,
    name: row.name,
    createdAt: row.created_at,
    ...(row.last_used_at === null ? {} : { lastUsedAt: row.last_used_at }),
    ...(row.revoked_at === null ? {} : { revokedAt: row.revoked_at }),
  };
}

async function migrate(pool: pg.Pool): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    // Two instances starting together: the second waits here until the first has committed.
    await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK_KEY]);
    await client.query(
      'CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL)',
    );
    const { rows } = await client.query<{ version: number | null }>(
      'SELECT MAX(version) AS version FROM schema_version',
    );
    for (
      let version = (rows[0]?.version ?? 0) + 1;
      version <= postgresMigrations.length;
      version++
    ) {
      await client.query(postgresMigrations[version - 1] as string);
      await client.query('INSERT INTO schema_version (version, applied_at) VALUES ($1, now())', [
        version,
      ]);
    }
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}

function createPool(options: PostgresStoreOptions, queryTimeoutMs: number): pg.Pool {
  const pool = new pg.Pool({
    connectionString: options.url,
    max: options.poolSize,
    connectionTimeoutMillis: options.connectTimeoutMs,
    // node-postgres sends none for 0.
    statement_timeout: options.statementTimeoutMs,
    // A query whose server vanished without closing the socket must still end.
    query_timeout: queryTimeoutMs,
    keepAlive: true,
  });
  // An idle client whose server went away emits 'error' on the pool; unhandled, it would end the process.
  pool.on('error', (error) => options.onIdleConnectionLost?.(error));
  return pool;
}

/**
 * The `statement_timeout` a connection gets from the role, the database or the server (in ms; 0
 * for none), for `statementTimeoutMs: 0`; refuses when there is none.
 */
async function serverStatementTimeoutMs(options: PostgresStoreOptions): Promise<number> {
  const probe = createPool({ ...options, poolSize: 1 }, options.connectTimeoutMs);
  try {
    const { rows } = await probe.query<{ ms: number }>(
      "SELECT setting::int AS ms FROM pg_settings WHERE name = 'statement_timeout'",
    );
    const ms = rows[0]?.ms ?? 0;
    if (ms > 0) return ms;
    throw new Error(
      'PG_STATEMENT_TIMEOUT_MS=0 leaves the statement time-out to the PostgreSQL server, but it ' +
        'sets none for this role and database; set one, for example ALTER ROLE plants SET ' +
        "statement_timeout = '5s', or set PG_STATEMENT_TIMEOUT_MS.",
    );
  } finally {
    await probe.end();
  }
}

/** A clearer error for a pooler that refuses the statement time-out, else the error itself. */
function explained(error: unknown): unknown {
  const { message } = error as { message?: unknown };
  if (
    typeof message !== 'string' ||
    !/unsupported startup parameter: statement_timeout/.test(message)
  ) {
    return error;
  }
  return new Error(
    `The connection refused the statement time-out (${message}), as PgBouncer does: set ` +
      'PG_STATEMENT_TIMEOUT_MS=0, and a statement_timeout for the role or database (ALTER ROLE ' +
      "plants SET statement_timeout = '5s'), which the server then applies.",
    { cause: error },
  );
}

/**
 * Connects a pool to the database, refuses one whose encoding is not UTF8 (checkEncoding), applies
 * pending migrations under a lock and returns the store over it.
 */
export async function openPostgresPlantStore(options: PostgresStoreOptions): Promise<PlantStore> {
  let pool: pg.Pool | undefined;
  try {
    const statementTimeoutMs =
      options.statementTimeoutMs > 0
        ? options.statementTimeoutMs
        : await serverStatementTimeoutMs(options);
    pool = createPool(options, statementTimeoutMs + options.connectTimeoutMs);
    await checkEncoding(pool);
    await migrate(pool);
  } catch (error) {
    await pool?.end();
    throw explained(error);
  }
  return createPostgresPlantStore(pool);
}

/**
 * How the hot statements are batched. Two batches of a kind in flight: one forms while the other
 * is answered (measured: one or four in flight were no faster, and fewer in flight means bigger
 * batches but a longer wait). At most 1,000 requests per statement: names and tags up to 255 code
 * points each keep its parameters under a few MiB.
 */
const BATCHING: BatcherOptions = { maxInFlight: 2, maxBatch: 1000 };

/**
 * The inputs of a batch to send, one per key: a later input with the key of an earlier one is not
 * sent, since it would find what the first did (a plant stored or deleted by it). `answers` maps
 * the ids the statement returned to each input's answer: true only for the first input of an id
 * the statement returned.
 */
function firstOfEachKey<I>(inputs: readonly I[], key: (input: I) => string) {
  const keys = inputs.map(key);
  const seen = new Set<string>();
  const first = keys.map((k) => {
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
  return {
    sent: inputs.filter((_, i) => first[i]),
    answers(rows: readonly { id: string }[]): boolean[] {
      const returned = new Set(rows.map((row) => row.id));
      return keys.map((k, i) => first[i] === true && returned.has(k));
    },
  };
}

/**
 * The PlantStore over a node-postgres pool whose database is migrated; connection failures become
 * StoreUnavailableError. Creates, deletes and token look-ups are batched (createBatcher): under
 * load, one statement and one commit serve many requests, each request's statement beginning after
 * the request arrived.
 */
export function createPostgresPlantStore(pool: pg.Pool): PlantStore {
  const query = <R extends pg.QueryResultRow>(text: string, values: unknown[] = []) =>
    pool.query<R>(text, values);
  const tokenColumns = 'id, name, created_at, last_used_at, revoked_at';
  // Named: each pooled connection parses and plans them once.
  const run = <R extends pg.QueryResultRow>(name: string, text: string, values: unknown[]) =>
    pool.query<R>({ name, text, values });

  // Every batch takes its rows' locks in ascending id order: two batches in flight that share
  // ids (one sent 1, 2 and the other 2, 1) would otherwise wait for each other, a deadlock.
  const createPlants = createBatcher(async (plants: readonly NewPlant[]) => {
    const { sent, answers } = firstOfEachKey(plants, (plant) => plant.id.toString());
    const { rows } = await run<{ id: string }>(
      'plant-store-create-plants',
      `INSERT INTO plants (id, name, tag)
       SELECT id, name, tag FROM unnest($1::bigint[], $2::text[], $3::text[]) AS batch (id, name, tag)
       ORDER BY id
       ON CONFLICT (id) DO NOTHING RETURNING id`,
      [
        sent.map((plant) => plant.id.toString()),
        sent.map((plant) => plant.name),
        sent.map((plant) => plant.tag ?? null),
      ],
    );
    return answers(rows);
  }, BATCHING);

  const deletePlants = createBatcher(async (ids: readonly bigint[]) => {
    const { sent, answers } = firstOfEachKey(ids, (id) => id.toString());
    const { rows } = await run<{ id: string }>(
      'plant-store-delete-plants',
      `DELETE FROM plants WHERE id IN (
         SELECT id FROM plants WHERE id = ANY($1::bigint[]) ORDER BY id FOR UPDATE
       ) RETURNING id`,
      [sent.map((id) => id.toString())],
    );
    return answers(rows);
  }, BATCHING);

  const findActiveTokens = createBatcher(async (hashes: readonly string[]) => {
    const { rows } = await run<TokenRow & { hash: string }>(
      'plant-store-find-active-tokens',
      `SELECT hash, ${tokenColumns} FROM tokens WHERE hash = ANY($1::text[]) AND revoked_at IS NULL`,
      [[...new Set(hashes)]],
    );
    const found = new Map(rows.map((row) => [row.hash, tokenRowToRecord(row)]));
    return hashes.map((hash) => found.get(hash));
  }, BATCHING);

  return reportingUnavailable(
    {
      async createPlant(plant) {
        if (!(await createPlants.submit(plant))) return undefined;
        return shownPlant(plant);
      },
      deletePlant: (id) => deletePlants.submit(id),
      async insertToken(token) {
        await query('INSERT INTO tokens (id, name, hash, created_at) VALUES ($1, $2, $3, $4)', [
          token.id,
          token.name,
          token.hash,
          token.createdAt,
        ]);
      },
      findActiveToken: (hash) => findActiveTokens.submit(hash),
      async touchToken(id, at) {
        await query('UPDATE tokens SET last_used_at = $1 WHERE id = $2', [at, id]);
      },
      async listTokens() {
        const { rows } = await query<TokenRow>(
          `SELECT ${tokenColumns} FROM tokens ORDER BY created_at, id`,
        );
        return rows.map(tokenRowToRecord);
      },
      async revokeToken(id, at) {
        const result = await query(
          'UPDATE tokens SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL',
          [at, id],
        );
        return result.rowCount === 1;
      },
      async countActiveTokens() {
        const { rows } = await query<{ count: string }>(
          'SELECT COUNT(*) AS count FROM tokens WHERE revoked_at IS NULL',
        );
        return Number(rows[0]?.count ?? 0);
      },
      async ping() {
        // One round trip: a standby, or a database set read-only, answers but takes no write.
        const client = await pool.connect();
        let failure: Error | undefined;
        try {
          const { rows } = await client.query<{ read_only: string }>(
            "SELECT current_setting('transaction_read_only') AS read_only",
          );
          if (rows[0]?.read_only !== 'off') failure = new ReadOnlySessionError();
        } catch (error) {
          failure = error as Error;
        } finally {
          // Discarded when it failed or is read-only: the next connection may reach a primary
          // again (after a failover), even while /readyz is the only caller.
          client.release(failure);
        }
        if (failure !== undefined) throw failure;
      },
      async close() {
        await Promise.all([createPlants.drain(), deletePlants.drain(), findActiveTokens.drain()]);
        await pool.end();
      },
    },
    isUnavailable,
  );
}
