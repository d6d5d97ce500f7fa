import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import {
  StoreUnavailableError,
  type CommitTotals,
  type PlantStore,
} from '../../src/store/plant-store';
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

/** The running totals of a SQLite store's group commits, which it always reports. */
function totalsOf(target: PlantStore): CommitTotals {
  if (target.commitTotals === undefined)
    throw new Error('the SQLite store reports its commit totals');
  return target.commitTotals;
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

  it('counts the commits it answered, their writes and the time of their syncs', async () => {
    const totals = totalsOf(store);
    const before = { ...totals };
    await Promise.all(
      Array.from({ length: 10 }, (_, i) => store.createPlant({ id: BigInt(i), name: `p${i}` })),
    );
    expect(totals.commits - before.commits).toBe(1);
    expect(totals.writes - before.writes).toBe(10);
    expect(totals.syncSeconds).toBeGreaterThan(before.syncSeconds);

    for (let i = 10; i < 13; i++) await store.createPlant({ id: BigInt(i), name: `p${i}` });
    expect(totals.commits - before.commits).toBe(4);
    expect(totals.writes - before.writes).toBe(13);
  });

  it('counts no commit that failed, and no sync under NORMAL', async () => {
    const totals = totalsOf(store);
    const before = { ...totals };
    observer.exec('BEGIN IMMEDIATE');
    await Promise.allSettled([store.createPlant({ id: 1n, name: 'a' })]);
    observer.exec('ROLLBACK');
    expect({ ...totals }).toEqual(before);

    const normalFile = path.join(dir, 'normal.sqlite');
    const normal = openSqlitePlantStore({
      path: normalFile,
      synchronous: 'NORMAL',
      busyTimeoutMs: 50,
    });
    try {
      await Promise.all([normal.createPlant({ id: 1n, name: 'a' }), normal.deletePlant(2n)]);
      expect(totalsOf(normal)).toMatchObject({ writes: 2, syncSeconds: 0 });
      expect(totalsOf(normal).commits).toBeGreaterThanOrEqual(1);
    } finally {
      await normal.close();
    }
  });

  it('commits queued writes before closing', async () => {
    const pending = store.createPlant({ id: 3n, name: 'queued' });
    await store.close();
    expect(await pending).toEqual({ name: 'queued' });
    expect(observer.prepare('SELECT name FROM plants WHERE id = 3').pluck().get()).toBe('queued');
  });
});

/**
 * synchronous=FULL is kept by the store: each commit's WAL is synced with fdatasync on libuv's
 * thread pool before its writes are answered. The spy calls the real fdatasync; it only records
 * when the sync started and ended, or, for the failure test, answers an I/O error.
 */
describe('the WAL sync of synchronous=FULL', () => {
  let syncs: { rowsAtStart: number; done: boolean }[];
  let spy: jest.SpiedFunction<typeof fs.fdatasync>;
  const realFdatasync = fs.fdatasync;

  function rows(): number {
    return observer.prepare('SELECT COUNT(*) FROM plants').pluck().get() as number;
  }

  beforeEach(() => {
    syncs = [];
    spy = jest.spyOn(fs, 'fdatasync').mockImplementation(((fd, callback) => {
      const sync = { rowsAtStart: rows(), done: false };
      syncs.push(sync);
      realFdatasync(fd, (error) => {
        sync.done = true;
        callback(error);
      });
    }) as typeof fs.fdatasync);
  });
  afterEach(() => spy.mockRestore());

  /** Holds the next sync, recorded as the others are, until the function returned is called. */
  function holdNextSync(): () => void {
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    spy.mockImplementationOnce(((fd, callback) => {
      syncs.push({ rowsAtStart: rows(), done: false });
      void held.then(() => realFdatasync(fd, callback));
    }) as typeof fs.fdatasync);
    return () => release();
  }

  it('answers a write only after a sync that began once its commit was visible', async () => {
    const created = await store.createPlant({ id: 1n, name: 'Monstera' });

    expect(created).toEqual({ name: 'Monstera' });
    expect(syncs).toHaveLength(1);
    expect(syncs[0]).toEqual({ rowsAtStart: 1, done: true });
  });

  it('lets the writes that arrive during a sync wait for it, then commits them together', async () => {
    const release = holdNextSync();
    const first = store.createPlant({ id: 1n, name: 'first' });
    const later: Promise<unknown>[] = [];
    for (let i = 2; i <= 5; i++) {
      // Each in a turn of its own: without a sync in flight, each would be a commit of its own.
      await new Promise((resolve) => setImmediate(resolve));
      later.push(store.createPlant({ id: BigInt(i), name: `p${i}` }));
    }
    await new Promise((resolve) => setImmediate(resolve));
    expect(rows()).toBe(1);

    release();
    await Promise.all([first, ...later]);

    expect(syncs.map((sync) => sync.rowsAtStart)).toEqual([1, 5]);
  });

  it("commits and begins syncing the writes that waited for a sync before it answers that sync's writes", async () => {
    const release = holdNextSync();
    const first = store
      .createPlant({ id: 1n, name: 'first' })
      .then(() => ({ rows: rows(), syncs: syncs.length }));
    await new Promise((resolve) => setImmediate(resolve));
    const queued = store.createPlant({ id: 2n, name: 'queued' });
    await new Promise((resolve) => setImmediate(resolve));

    release();

    // The next commit's sync runs while the first commit's writes are answered.
    expect(await first).toEqual({ rows: 2, syncs: 2 });
    expect(await queued).toEqual({ name: 'queued' });
    expect(syncs.map((sync) => sync.rowsAtStart)).toEqual([1, 2]);
  });

  it('fails every write of a commit whose sync fails', async () => {
    spy.mockImplementation(((_fd, callback) => {
      callback(Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' }));
    }) as typeof fs.fdatasync);

    const outcomes = await Promise.allSettled([
      store.createPlant({ id: 1n, name: 'a' }),
      store.createPlant({ id: 2n, name: 'b' }),
    ]);

    expect(outcomes.map((outcome) => outcome.status)).toEqual(['rejected', 'rejected']);
    const reason = (outcomes[0] as PromiseRejectedResult).reason as Error;
    expect(reason).toBeInstanceOf(StoreUnavailableError);
    expect(reason.cause).toMatchObject({ code: 'EIO' });
  });

  it('after a failed sync, fails every later write without committing it, fails its ping and reports that it stopped', async () => {
    spy.mockImplementationOnce(((_fd, callback) => {
      callback(Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' }));
    }) as typeof fs.fdatasync);
    const failed = await store.createPlant({ id: 1n, name: 'a' }).catch((error: unknown) => error);
    expect(failed).toBeInstanceOf(StoreUnavailableError);
    const syncsAfterFailure = syncs.length;

    // The sync answers again, but the kernel may have dropped what it could not write before.
    const later = await store.createPlant({ id: 2n, name: 'b' }).catch((error: unknown) => error);

    expect(later).toBe(failed);
    expect(syncs).toHaveLength(syncsAfterFailure);
    expect(await store.stopped).toBe(failed);
    await expect(store.ping()).rejects.toBe(failed);
    // The failed commit is visible (it committed before its sync); the later write never began.
    expect(observer.prepare('SELECT id FROM plants').pluck().all()).toEqual([1]);
    expect(await store.findActiveToken('no such hash')).toBeUndefined();
  });

  it('waits for a sync in flight before closing', async () => {
    const pending = store.createPlant({ id: 3n, name: 'queued' });
    await new Promise((resolve) => setImmediate(resolve));
    // The commit is visible and its sync has begun, not ended.
    expect(syncs).toEqual([{ rowsAtStart: 1, done: false }]);

    await store.close();

    expect(syncs.every((sync) => sync.done)).toBe(true);
    expect(await pending).toEqual({ name: 'queued' });
  });

  it('commits and syncs what queued up during a sync before closing, even when that commit fails', async () => {
    const release = holdNextSync();
    const first = store.createPlant({ id: 1n, name: 'first' });
    await new Promise((resolve) => setImmediate(resolve));
    const queued = store.createPlant({ id: 2n, name: 'queued' }).catch((error: unknown) => error);
    observer.exec('BEGIN IMMEDIATE');

    const closed = store.close();
    // The queued commit starts once the first sync ends, and finds the lock held past busy_timeout.
    release();
    expect(await queued).toBeInstanceOf(StoreUnavailableError);
    observer.exec('ROLLBACK');
    await closed;

    expect(await first).toEqual({ name: 'first' });
  });

  it('does not sync by itself under synchronous=NORMAL', async () => {
    const normal = openSqlitePlantStore({
      path: path.join(dir, 'normal.sqlite'),
      synchronous: 'NORMAL',
      busyTimeoutMs: 50,
    });

    await normal.createPlant({ id: 1n, name: 'Monstera' });
    await normal.close();

    expect(syncs).toHaveLength(0);
  });
});
