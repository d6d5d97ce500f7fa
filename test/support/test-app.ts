import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import type { Express } from 'express';
import type { Response } from 'supertest';
import { createApp, type AppDeps } from '../../src/app';
import { loadOpenApiDocument, type OpenApiDocument } from '../../src/http/openapi-document';
import { flushRequestLines } from '../../src/http/request-log';

/** One JSON log line. */
export type LogLine = { level: number; message: string } & Record<string, unknown>;
import { createPlantsService } from '../../src/service/plants-service';
import { createTokensService, type TokensService } from '../../src/service/tokens-service';
import type { PlantStore } from '../../src/store/plant-store';
import { openPostgresPlantStore } from '../../src/store/postgres/postgres-plant-store';
import { openSqlitePlantStore } from '../../src/store/sqlite/sqlite-plant-store';
import { capturingLogger } from './log-lines';
import { createTestSchema } from './postgres';
import { withClient } from './postgres-database';
import { readPostgresPlants, readSqlitePlants, type StoredPlant } from './stored-plants';

export const SPEC_PATH = path.resolve(__dirname, '..', '..', 'openapi.yaml');

export interface TestApp {
  readonly app: Express;
  /** A real bearer secret issued through the token service. */
  readonly token: string;
  readonly store: PlantStore;
  readonly tokens: TokensService;
  /** What the app logged at error level (unexpected failures). */
  readonly errors: string[];
  /** Every line the app logged, parsed. */
  readonly logs: LogLine[];
  /** Makes the readiness probe report that the instance is going away. */
  startShutdown(): void;
  /** Drops the store's plants table through another connection: its next plant call fails. */
  dropPlantsTable(): Promise<void>;
  /** The store's plants by id, read through a read-only connection of its own, not the app's. */
  readPlants(): Promise<StoredPlant[]>;
  close(): Promise<void>;
}

/** The store the HTTP suite runs on: SQLite, or PostgreSQL in the jest project that sets this. */
export const TEST_STORE =
  process.env['PLANT_STORE_TEST_STORE'] === 'postgres' ? 'postgres' : 'sqlite';

/**
 * A fresh, empty store of the kind under test, how to remove it, how to drop its plants table, and
 * how to read its plants through a connection of another's.
 */
async function openTestStore(): Promise<{
  store: PlantStore;
  remove: () => Promise<void>;
  dropPlantsTable: () => Promise<void>;
  readPlants: () => Promise<StoredPlant[]>;
}> {
  if (TEST_STORE === 'postgres') {
    const schema = await createTestSchema();
    return {
      store: await openPostgresPlantStore(schema.options),
      remove: () => schema.drop(),
      async dropPlantsTable() {
        await withClient(schema.url, (client) => client.query('DROP TABLE plants'));
      },
      readPlants: () => readPostgresPlants(schema.url),
    };
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'plant-store-test-'));
  const file = path.join(dir, 'plants.sqlite');
  const store = openSqlitePlantStore({ path: file, synchronous: 'FULL', busyTimeoutMs: 1000 });
  return {
    store,
    remove: async () => fs.rmSync(dir, { recursive: true, force: true }),
    async dropPlantsTable() {
      const other = new Database(file);
      try {
        other.exec('DROP TABLE plants');
      } finally {
        other.close();
      }
    },
    readPlants: async () => readSqlitePlants(file),
  };
}

/**
 * The contract as the tests' validator sees it, with its response bodies closed: a test whose
 * answer carries a property the contract does not name then fails with a 500. The published
 * contract leaves them open for later minor versions (README, "Versioning policy").
 */
function withClosedResponseBodies(document: OpenApiDocument): OpenApiDocument {
  const spec = structuredClone(document.spec);
  const schemas = (spec['components'] as { schemas: Record<string, Record<string, unknown>> })
    .schemas;
  schemas['Plant']!['unevaluatedProperties'] = false;
  for (const name of ['Error', 'Health', 'Readiness']) {
    schemas[name]!['additionalProperties'] = false;
  }
  return { ...document, spec };
}

/**
 * The real app over a real store (a SQLite file in a fresh temp dir, or a fresh PostgreSQL schema),
 * with a real token and response validation on, against response bodies closed to unknown
 * properties.
 */
export async function buildTestApp(overrides: Partial<AppDeps> = {}): Promise<TestApp> {
  const { store, remove, dropPlantsTable, readPlants } = await openTestStore();
  const tokens = createTokensService({ store });
  const { secret } = await tokens.issue('test');
  const errors: string[] = [];
  const logs: LogLine[] = [];
  const logger = capturingLogger<LogLine>((entry, line) => {
    logs.push(entry);
    if (entry.level >= 50) errors.push(line);
  });
  let shuttingDown = false;
  const app = createApp({
    document: withClosedResponseBodies(loadOpenApiDocument(SPEC_PATH)),
    plants: createPlantsService({ store }),
    tokens,
    readiness: { checkStore: () => store.ping(), isShuttingDown: () => shuttingDown },
    logger,
    bodyLimitBytes: 64 * 1024,
    validateResponses: true,
    corsOrigins: [],
    trustProxyHops: 0,
    limits: {
      authFailures: 0,
      authFailureWindowMs: 60_000,
      tokenRequests: 0,
      tokenWindowMs: 60_000,
    },
    ...overrides,
  });
  return {
    app,
    token: secret,
    store,
    tokens,
    get errors() {
      flushRequestLines();
      return errors;
    },
    get logs() {
      flushRequestLines();
      return logs;
    },
    startShutdown() {
      shuttingDown = true;
    },
    dropPlantsTable,
    readPlants,
    async close() {
      await store.close().catch(() => undefined);
      await remove();
    },
  };
}

/** Asserts the contract's error answer: the status, JSON, exactly {error, message}, error equal to the status. */
export function expectError(res: Response, status: number, message?: string | RegExp): void {
  expect(res.status).toBe(status);
  expect(res.headers['content-type']).toMatch(/^application\/json(;|$)/);
  expect(res.headers['x-content-type-options']).toBe('nosniff');
  expect(Object.keys(res.body as object).sort()).toEqual(['error', 'message']);
  expect(res.body.error).toBe(status);
  expect(typeof res.body.message).toBe('string');
  expect(res.body.message.length).toBeGreaterThan(0);
  if (message !== undefined) expect(res.body.message).toMatch(message);
}

/**
 * Asserts that the store holds no plant at all, read through a connection of its own: the request
 * stored nothing, under any id (also one clamped or wrapped to the int64 bounds).
 */
export async function expectNothingStored(t: Pick<TestApp, 'readPlants'>): Promise<void> {
  expect(await t.readPlants()).toStrictEqual([]);
}

/** For supertest's `.serialize()`: sends a Buffer body byte for byte, whatever the Content-Type says. */
export const sendBytesAsIs = ((bytes: Buffer) => bytes) as unknown as (body: unknown) => string;
