import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { StoreUnavailableError, type PlantStore } from '../../src/store/plant-store';
import { openSqlitePlantStore } from '../../src/store/sqlite/sqlite-plant-store';

let dir: string;
let file: string;
let store: PlantStore;
let observer: Database.Database;

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'plant-store-group-'));
  file = path.join(dir, 'plants.sqlite');
  store = openSqlitePlantStore({ path: file, synchronous: 'FULL', busyTimeoutMs: 50 });
  observer = new Database(file);
});
afterEach(async () => {
  observer.close();
  await store.close().catch(() => undefined);
  fs.rmSync(dir, { recursive: true, force: true });
});

/**
 * Pages written to the write-ahead log so far. Every commit appends at least one frame, so 100
 * separate commits of one row each append at least 100; one commit of 100 small rows, a few.
 */
function walFrames(): number {
  const pageSize = observer.pragma('page_size', { simple: true }) as number;
  const size = fs.existsSync(`${file}-wal`) ? fs.statSync(`${file}-wal`).size : 0;
  return Math.max(0, (size - 32) / (pageSize + 24));
}

describe('group commit in the SQLite store', () => {
  it('commits writes issued together in one transaction', async () => {
    const before = walFrames();
    const results = await Promise.all(
      Array.from({ length: 100 }, (_, i) => store.createPlant({ id: BigInt(i), name: `p${i}` })),
    );
    expect(results.filter((plant) => plant !== undefined)).toHaveLength(100);
    expect(walFrames() - before).toBeLessThanOrEqual(5);
    expect(observer.prepare('SELECT COUNT(*) FROM plants').pluck().get()).toBe(100);
  });

  it('commits writes issued in separate turns of the event loop separately', async () => {
    const before = walFrames();
    for (let i = 0; i < 100; i++) await store.createPlant({ id: BigInt(i), name: `p${i}` });
    expect(walFrames() - before).toBeGreaterThanOrEqual(100);
  });

  it('runs the writes of one batch in arrival order, each with its own answer', async () => {
    const [created, duplicate, deleted, deletedAgain, recreated] = await Promise.all([
      store.createPlant({ id: 7n, name: 'first' }),
      store.createPlant({ id: 7n, name: 'second' }),
      store.deletePlant(7n),
      store.deletePlant(7n),
      store.createPlant({ id: 7n, name: 'third' }),
    ]);
    expect([created, duplicate, deleted, deletedAgain, recreated]).toEqual([
      { name: 'first' },
      undefined,
      true,
      false,
      { name: 'third' },
    ]);
    expect(observer.prepare('SELECT name FROM plants WHERE id = 7').pluck().get()).toBe('third');
  });

  it('fails every write of a batch that cannot commit, and stores none of them', async () => {
    observer.exec('BEGIN IMMEDIATE');
    const outcomes = await Promise.allSettled([
      store.createPlant({ id: 1n, name: 'a' }),
      store.createPlant({ id: 2n, name: 'b' }),
    ]);
    observer.exec('ROLLBACK');
    for (const outcome of outcomes) {
      expect(outcome.status).toBe('rejected');
      expect((outcome as PromiseRejectedResult).reason).toBeInstanceOf(StoreUnavailableError);
    }
    expect(observer.prepare('SELECT COUNT(*) FROM plants').pluck().get()).toBe(0);
    expect(await store.createPlant({ id: 1n, name: 'a' })).toEqual({ name: 'a' });
  });

  it('commits queued writes before closing', async () => {
    const pending = store.createPlant({ id: 3n, name: 'queued' });
    await store.close();
    expect(await pending).toEqual({ name: 'queued' });
    expect(observer.prepare('SELECT name FROM plants WHERE id = 3').pluck().get()).toBe('queued');
  });
});
