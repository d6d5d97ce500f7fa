import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { StoreUnavailableError, type PlantStore } from '../../src/store/plant-store';
import {
  createSqlitePlantStore,
  openSqlitePlantStore,
} from '../../src/store/sqlite/sqlite-plant-store';

describe('a SQLite store whose file cannot take a write', () => {
  let dir: string;
  let file: string;
  const opened: PlantStore[] = [];

  /** The store over its own connection to a migrated file, and that connection. */
  async function openOver(
    options?: Database.Options,
  ): Promise<{ db: Database.Database; store: PlantStore }> {
    await openSqlitePlantStore({ path: file, synchronous: 'NORMAL', busyTimeoutMs: 50 }).close();
    const db = new Database(file, { fileMustExist: true, ...options });
    const store = createSqlitePlantStore(db);
    opened.push(store);
    return { db, store };
  }

  function plantIds(): bigint[] {
    const reader = new Database(file, { readonly: true, fileMustExist: true });
    try {
      return reader
        .prepare('SELECT id FROM plants ORDER BY id')
        .pluck()
        .safeIntegers(true)
        .all() as bigint[];
    } finally {
      reader.close();
    }
  }

  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'plant-store-'));
    file = path.join(dir, 'plants.sqlite');
  });

  afterEach(async () => {
    for (const store of opened.splice(0)) await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('rejects a write past a full disk with StoreUnavailableError, keeps the plants before it, and writes again once there is room', async () => {
    const { db, store } = await openOver();
    // The file may grow by a few pages only: SQLite answers SQLITE_FULL, as on a full disk.
    db.pragma(`max_page_count = ${(db.pragma('page_count', { simple: true }) as number) + 4}`);
    const name = 'x'.repeat(200);
    const created: bigint[] = [];
    let failure: unknown;
    for (let id = 1n; id <= 1000n && failure === undefined; id++) {
      try {
        await store.createPlant({ id, name });
        created.push(id);
      } catch (error) {
        failure = error;
      }
    }

    expect(failure).toBeInstanceOf(StoreUnavailableError);
    expect((failure as Error).cause).toEqual(expect.objectContaining({ code: 'SQLITE_FULL' }));
    expect(created.length).toBeGreaterThan(0);
    expect(plantIds()).toStrictEqual(created);

    db.pragma('max_page_count = 1000000');
    const next = BigInt(created.length + 1);

    expect(await store.createPlant({ id: next, name })).toStrictEqual({ name });
    expect(plantIds()).toStrictEqual([...created, next]);
  });

  // A file the process may not write (mode 0444) SQLite opens read-only by itself, and answers its
  // writes SQLITE_READONLY; as root every file is writable, so the connection is opened read-only
  // here instead, which SQLite answers the same way.
  it('rejects a write to a read-only database with StoreUnavailableError, and keeps serving reads', async () => {
    const { store } = await openOver({ readonly: true });

    const failure: unknown = await store
      .createPlant({ id: 1n, name: 'Monstera' })
      .catch((error: unknown) => error);

    expect(failure).toBeInstanceOf(StoreUnavailableError);
    expect((failure as Error).cause).toEqual(
      expect.objectContaining({ code: expect.stringMatching(/^SQLITE_READONLY/) as string }),
    );
    expect(await store.countActiveTokens()).toBe(0);
    expect(plantIds()).toStrictEqual([]);
  });

  it('leaves a constraint violation as it is', async () => {
    const { db, store } = await openOver();
    db.exec(
      "CREATE TRIGGER refuse BEFORE INSERT ON plants BEGIN SELECT RAISE(ABORT, 'refused'); END",
    );

    const failure: unknown = await store
      .createPlant({ id: 1n, name: 'Monstera' })
      .catch((error: unknown) => error);

    expect(failure).not.toBeInstanceOf(StoreUnavailableError);
    expect(failure).toEqual(expect.objectContaining({ code: 'SQLITE_CONSTRAINT_TRIGGER' }));
  });
});
