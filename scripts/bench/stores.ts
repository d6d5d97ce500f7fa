/**
 * Stores for the service under test, each prepared the way a user would (the token CLI creates
 * the schema and a real token), then prefilled directly and fast: SQLite with better-sqlite3 in
 * one transaction, PostgreSQL with generate_series. One fresh store per measurement.
 */
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { PLANT_NAME, PLANT_TAG, plantId, plantIdSql, type IdOrder } from './ids';
import { runNode } from './proc';

export type StoreName = 'sqlite-full' | 'sqlite-normal' | 'postgres';
export const STORE_NAMES: readonly StoreName[] = ['sqlite-full', 'sqlite-normal', 'postgres'];

export interface PreparedStore {
  /** Environment for the service and the token CLI. */
  readonly env: Readonly<Record<string, string>>;
  readonly token: string;
  readonly prefillMs: number;
  dispose(): Promise<void>;
}

const SECRET = /\bplnt_[A-Za-z0-9_-]{43}\b/;

/** `node dist/scripts/token.js create --name bench`, as README says; returns the printed secret. */
async function createToken(serviceRoot: string, env: Record<string, string>): Promise<string> {
  const stdout = await runNode(
    null,
    [path.join(serviceRoot, 'dist', 'scripts', 'token.js'), 'create', '--name', 'bench'],
    { ...process.env, ...env },
    serviceRoot,
  );
  const secret = SECRET.exec(stdout)?.[0];
  if (secret === undefined) throw new Error(`the token CLI printed no secret:\n${stdout}`);
  return secret;
}

/** Removes a SQLite database and the files SQLite keeps beside it. */
export function removeSqliteFiles(file: string): void {
  for (const suffix of ['', '-wal', '-shm', '-journal']) fs.rmSync(file + suffix, { force: true });
}

async function prepareSqlite(options: {
  serviceRoot: string;
  dataDir: string;
  label: string;
  synchronous: 'FULL' | 'NORMAL';
  rows: number;
  idOrder: IdOrder;
}): Promise<PreparedStore> {
  const file = path.join(options.dataDir, `${options.label}.sqlite`);
  removeSqliteFiles(file);
  const env = { SQLITE_PATH: file, SQLITE_SYNCHRONOUS: options.synchronous };
  const token = await createToken(options.serviceRoot, env);
  const started = Date.now();
  if (options.rows > 0) {
    const db = new Database(file);
    try {
      db.pragma('synchronous = OFF');
      db.pragma('cache_size = -524288');
      const insert = db.prepare('INSERT INTO plants (id, name, tag) VALUES (?, ?, ?)');
      db.transaction(() => {
        for (let n = 0; n < options.rows; n++) {
          insert.run(BigInt(plantId(n, options.idOrder)), PLANT_NAME, PLANT_TAG);
        }
      })();
      // Leave the file as a long-running service would find it: checkpointed, WAL empty.
      db.pragma('wal_checkpoint(TRUNCATE)');
    } finally {
      db.close();
    }
  }
  return {
    env,
    token,
    prefillMs: Date.now() - started,
    dispose: async () => removeSqliteFiles(file),
  };
}

let schemaSequence = 0;

/** The URL with `options=-c search_path=<schema>`, so the service and the CLI use that schema. */
function withSearchPath(url: string, schema: string): string {
  const options = encodeURIComponent(`-c search_path=${schema}`);
  return `${url}${url.includes('?') ? '&' : '?'}options=${options}`;
}

async function preparePostgres(options: {
  serviceRoot: string;
  url: string;
  rows: number;
  idOrder: IdOrder;
}): Promise<PreparedStore> {
  const schema = `plant_bench_${process.pid}_${++schemaSequence}`;
  const admin = new pg.Client({ connectionString: options.url });
  await admin.connect();
  try {
    await admin.query(`CREATE SCHEMA ${schema}`);
    const env = { DATABASE_URL: withSearchPath(options.url, schema) };
    const token = await createToken(options.serviceRoot, env);
    const started = Date.now();
    if (options.rows > 0) {
      await admin.query(
        `INSERT INTO ${schema}.plants (id, name, tag)
         SELECT ${plantIdSql('g', options.idOrder)}, $2, $3 FROM generate_series(0, $1::bigint - 1) AS g`,
        [options.rows, PLANT_NAME, PLANT_TAG],
      );
      // As a long-running table would be: statistics known, visibility map set.
      await admin.query(`VACUUM ANALYZE ${schema}.plants`);
    }
    const prefillMs = Date.now() - started;
    return {
      env,
      token,
      prefillMs,
      dispose: async () => {
        const client = new pg.Client({ connectionString: options.url });
        await client.connect();
        try {
          await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
        } finally {
          await client.end();
        }
      },
    };
  } catch (error) {
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => undefined);
    throw error;
  } finally {
    await admin.end();
  }
}

/** The PostgreSQL server the benchmarks create their schemas in, when no URL is given. */
export function defaultPostgresUrl(env: NodeJS.ProcessEnv = process.env): string {
  return (
    env['BENCH_DATABASE_URL'] ??
    env['PLANT_STORE_TEST_DATABASE_URL'] ??
    'postgres://postgres@127.0.0.1:5432/test'
  );
}

/** Resolves when PostgreSQL answers at `url`; rejects with the reason otherwise. */
export async function checkPostgres(url: string): Promise<void> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3000 });
  await client.connect();
  await client.end();
}

export function prepareStore(
  store: StoreName,
  options: {
    serviceRoot: string;
    dataDir: string;
    postgresUrl: string;
    label: string;
    rows: number;
    idOrder: IdOrder;
  },
): Promise<PreparedStore> {
  if (store === 'postgres') return preparePostgres({ ...options, url: options.postgresUrl });
  return prepareSqlite({ ...options, synchronous: store === 'sqlite-full' ? 'FULL' : 'NORMAL' });
}
