import { EventEmitter } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import workerThreads from 'node:worker_threads';
import Database from 'better-sqlite3';
import type { PlantStore } from '../../src/store/plant-store';
import {
  openSqlitePlantStore,
  type SqliteStoreOptions,
  type SqliteSynchronous,
} from '../../src/store/sqlite/sqlite-plant-store';
import { descriptorsOf } from '../support/descriptors';

/** Checkpoints after this many writes: small, so that a test goes through many of them. */
const EVERY = 100;

let dir: string;
let file: string;
let store: PlantStore | undefined;

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'plant-store-checkpoints-'));
  file = path.join(dir, 'plants.sqlite');
});
afterEach(async () => {
  jest.restoreAllMocks();
  await store?.close();
  store = undefined;
  fs.rmSync(dir, { recursive: true, force: true });
});

/** What the store tells of its checkpoints' hand-backs. */
type CheckpointEvents = Pick<
  SqliteStoreOptions,
  'onCheckpointsHandedBack' | 'onCheckpointsTakenBack'
>;

function openOver(synchronous: SqliteSynchronous, events: CheckpointEvents = {}): PlantStore {
  return openSqlitePlantStore({
    path: file,
    synchronous,
    busyTimeoutMs: 1000,
    checkpointEveryWrites: EVERY,
    ...events,
  });
}

/** The store of the test, closed after it. */
function open(synchronous: SqliteSynchronous, events: CheckpointEvents = {}): PlantStore {
  store = openOver(synchronous, events);
  return store;
}

/** Another store over the same file, in the same process; the test closes it. */
const openSecond = () => openOver('FULL');

/** Frames the WAL file has room for: its largest size so far, since a restart reuses the file. */
function walFrames(): number {
  const size = fs.existsSync(`${file}-wal`) ? fs.statSync(`${file}-wal`).size : 0;
  return Math.max(0, (size - 32) / (4096 + 24));
}

/** An id far from its neighbours, so that each write lands on a page of its own, as clients' ids do. */
const scattered = (n: number) => (BigInt(n) * 0x1e3779b97f4a7c15n) % (1n << 62n);

/** `commits` transactions of `perCommit` writes each (one batch per turn of the event loop). */
async function writeInBatches(target: PlantStore, commits: number, perCommit: number, from = 0) {
  for (let c = 0; c < commits; c++) {
    const batch = Array.from({ length: perCommit }, (_, i) =>
      target.createPlant({ id: scattered(from + c * perCommit + i), name: `plant ${i}` }),
    );
    expect((await Promise.all(batch)).every((plant) => plant !== undefined)).toBe(true);
  }
}

/** A copy of the database file that SQLite reads as damaged: taken while pages were being written into it. */
function isTornCopy(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^SQLITE_(CORRUPT|NOTADB)/.test(code);
}

/** Rows in a copy of the database file taken now, or undefined when the copy is torn. */
function rowsInCopy(): number | undefined {
  const copy = path.join(dir, 'file-alone.sqlite');
  fs.copyFileSync(file, copy);
  const db = new Database(copy, { readonly: true });
  try {
    if (db.pragma('quick_check', { simple: true }) !== 'ok') return undefined;
    const exists = db
      .prepare("SELECT COUNT(*) FROM sqlite_schema WHERE type = 'table' AND name = 'plants'")
      .pluck()
      .get();
    return exists === 0 ? 0 : (db.prepare('SELECT COUNT(*) FROM plants').pluck().get() as number);
  } catch (error) {
    if (isTornCopy(error)) return undefined;
    throw error;
  } finally {
    db.close();
  }
}

/**
 * Rows in the database file alone, without its WAL: what checkpoints have copied into it. The
 * checkpoint thread may still be copying pages into the file when the writes have been answered, so
 * a copy of the file can be torn (some pages from before a write, some from after): such a copy is
 * taken again a moment later, once the thread's pass is over.
 */
async function rowsInFileAlone(): Promise<number> {
  for (let attempt = 0; attempt < 40; attempt++) {
    const rows = rowsInCopy();
    if (rows !== undefined) return rows;
    await sleep(25);
  }
  throw new Error('every copy of the database file was torn');
}

/**
 * Runs `body` with each thread Node's Worker would start made by `thread` instead: what the system
 * does to threads, which a test cannot make it do (root, which runs the tests, is exempt from the
 * limits a test could set itself). Resolves with how many threads were asked for.
 */
async function withThreads(
  thread: (...args: ConstructorParameters<typeof workerThreads.Worker>) => workerThreads.Worker,
  body: () => Promise<void>,
): Promise<number> {
  const threads = jest.spyOn(workerThreads, 'Worker').mockImplementation(thread);
  try {
    await body();
    return threads.mock.calls.length;
  } finally {
    threads.mockRestore();
  }
}

/** What Node 20 throws when the process may start no more threads (a container's pids limit). */
const noThread = (): never => {
  throw Object.assign(new Error('EAGAIN'), { code: 'ERR_WORKER_INIT_FAILED' });
};

/** What Node's error says when a thread goes past its heap's limit. */
const OUT_OF_MEMORY = 'Worker terminated due to reaching memory limit: JS heap out of memory';

/** The error a thread emits when it goes past its heap's limit. */
const outOfMemory = () =>
  Object.assign(new Error(OUT_OF_MEMORY), { code: 'ERR_WORKER_OUT_OF_MEMORY' });

/**
 * A thread that fails at its first pass as one out of memory does: an `error` event, then its
 * exit, with code 1; asked to close, it exits with 0.
 */
function failingThread(): workerThreads.Worker {
  const thread = Object.assign(new EventEmitter(), {
    postMessage(message: string) {
      setImmediate(() => {
        if (message === 'pass') {
          thread.emit('error', outOfMemory());
        }
        thread.emit('exit', message === 'pass' ? 1 : 0);
      });
    },
  });
  return thread as unknown as workerThreads.Worker;
}

/**
 * Threads that fail at their first pass with an `error` event, as failingThread's, but exit only
 * when `exit` is called: until then the pass they were asked for stays unanswered.
 */
function threadsExitingLater(): { thread: () => workerThreads.Worker; exit: () => void } {
  const running: EventEmitter[] = [];
  return {
    thread: () => {
      const thread = Object.assign(new EventEmitter(), {
        postMessage(message: string) {
          setImmediate(() => {
            if (message !== 'pass') return;
            thread.emit('error', outOfMemory());
          });
        },
      });
      running.push(thread);
      return thread as unknown as workerThreads.Worker;
    },
    exit: () => {
      for (const thread of running.splice(0)) thread.emit('exit', 1);
    },
  };
}

describe.each<SqliteSynchronous>(['FULL', 'NORMAL'])('WAL checkpoints (synchronous=%s)', (mode) => {
  it('copies the WAL into the database file and restarts it, keeping it far below its unchecked size', async () => {
    const target = open(mode);

    await writeInBatches(target, 300, 10);
    expect(target.walCheckpoints?.handedBack()).toBe(false);

    // Unchecked, 300 commits of 10 scattered rows append well over 1,000 frames (SQLite's own
    // threshold); restarted every few hundred writes, the WAL never grows to half of that.
    expect(walFrames()).toBeGreaterThan(0);
    expect(walFrames()).toBeLessThan(500);
    // Everything up to the last restart is in the file itself.
    expect(await rowsInFileAlone()).toBeGreaterThanOrEqual(3000 - 3 * EVERY - 500);
  });

  it.each([
    [
      'no checkpoint thread can start',
      noThread,
      'starting the checkpoint thread: EAGAIN (ERR_WORKER_INIT_FAILED)',
    ],
    [
      // Its exit, after the error, answers the pass too: said once all the same.
      'the thread fails at a pass',
      failingThread,
      `the checkpoint thread failed: ${OUT_OF_MEMORY} (ERR_WORKER_OUT_OF_MEMORY)`,
    ],
  ])(
    'answers every write as stored when %s, lets SQLite checkpoint instead, tries the thread again less and less often, and says why at each failure',
    async (_, thread, reason) => {
      const reasons: string[] = [];
      const attempts = await withThreads(thread, () =>
        writeInBatches(
          open(mode, { onCheckpointsHandedBack: (each) => reasons.push(each) }),
          300,
          10,
        ),
      );
      // Tried at 100 writes, then 200, 400 and 800 writes after each failure (about 300, 700 and
      // 1,500 writes in); the next try would come at about 3,100.
      expect(attempts).toBe(4);
      expect(reasons).toEqual([reason, reason, reason, reason]);
      expect(store!.walCheckpoints?.handedBack()).toBe(true);

      // SQLite's own checkpoints (every 1,000 pages) kept the WAL from growing past 3,000 frames.
      expect(walFrames()).toBeLessThan(1200);
      expect(await rowsInFileAlone()).toBeGreaterThanOrEqual(3000 - 1200);
    },
  );

  it('answers every write as stored when the listener told of the hand-back throws', async () => {
    let told = 0;
    await withThreads(noThread, () =>
      writeInBatches(
        open(mode, {
          onCheckpointsHandedBack: () => {
            told++;
            throw new Error('a listener that fails');
          },
        }),
        300,
        10,
      ),
    );
    expect(told).toBe(4);
    expect(await rowsInFileAlone()).toBeGreaterThanOrEqual(3000 - 1200);
  });

  it('tries the thread again only once the one that failed has exited', async () => {
    const threads = threadsExitingLater();
    const reasons: string[] = [];
    const attempts = await withThreads(threads.thread, async () => {
      const target = open(mode, { onCheckpointsHandedBack: (reason) => reasons.push(reason) });
      // It fails at 100 writes; its pass unanswered, no other thread is tried 200 writes later.
      await writeInBatches(target, 100, 10);
      expect(reasons).toHaveLength(1);
      threads.exit();
      // Once it has exited, the next commit tries another, which fails in turn.
      await writeInBatches(target, 100, 10, 1000);
      threads.exit();
    });
    expect(attempts).toBe(2);
    expect(reasons).toHaveLength(2);
  });

  it('takes the checkpoints back once the thread, tried again, works, and says so once', async () => {
    const RealWorker = workerThreads.Worker;
    const pragma = jest.spyOn(Database.prototype, 'pragma');
    const reasons: string[] = [];
    let takenBack = 0;
    let tries = 0;
    const attempts = await withThreads(
      (...args) => (tries++ === 0 ? noThread() : new RealWorker(...args)),
      async () => {
        const target = open(mode, {
          onCheckpointsHandedBack: (reason) => reasons.push(reason),
          onCheckpointsTakenBack: () => takenBack++,
        });
        // The thread cannot start at 100 writes; tried again 200 writes later, it starts.
        await writeInBatches(target, 30, 10);
        expect(reasons).toHaveLength(1);
        await writeInBatches(target, 270, 10, 300);
      },
    );
    expect(attempts).toBe(2);
    expect(takenBack).toBe(1);
    expect(store!.walCheckpoints?.handedBack()).toBe(false);
    // The store's connection left checkpoints to the thread, to SQLite, then to the thread again.
    const autocheckpoints = pragma.mock.calls
      .map(([source]) => source)
      .filter((source) => source.startsWith('wal_autocheckpoint'));
    expect(autocheckpoints).toEqual([
      'wal_autocheckpoint = 0',
      'wal_autocheckpoint = 1000',
      'wal_autocheckpoint = 0',
    ]);
    // The thread's checkpoints copy the WAL into the file and restart it, as before the failure.
    expect(await rowsInFileAlone()).toBeGreaterThanOrEqual(3000 - 3 * EVERY - 500);
  });

  it('keeps every answered write across a close and a reopen, and leaves no WAL behind', async () => {
    await writeInBatches(open(mode), 200, 15);
    await store!.close();
    store = undefined;

    // The checkpoint thread's connection closed first, so the store's was the last and removed the WAL.
    expect(fs.existsSync(`${file}-wal`)).toBe(false);
    const db = new Database(file, { readonly: true });
    try {
      expect(db.prepare('SELECT COUNT(*) FROM plants').pluck().get()).toBe(3000);
      expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
    } finally {
      db.close();
    }
  });

  it('goes on answering reads and writes of other turns while a checkpoint is under way', async () => {
    const target = open(mode);
    await writeInBatches(target, 30, 10);
    // Many small commits, each in its own turn, while the thread copies in the background.
    for (let i = 0; i < 300; i++) {
      const id = scattered(10_000 + i);
      expect(await target.createPlant({ id, name: 'later' })).toEqual({ name: 'later' });
      if (i % 3 === 0) expect(await target.deletePlant(id)).toBe(true);
    }
    expect(walFrames()).toBeLessThan(500);
    const db = new Database(file, { readonly: true });
    try {
      expect(db.prepare('SELECT COUNT(*) FROM plants').pluck().get()).toBe(300 + 200);
    } finally {
      db.close();
    }
  });
});

/** POSIX locks this process holds on `target` (Linux: /proc/locks, "N: POSIX ADVISORY READ pid dev:ino start end"). */
function locksOf(target: string): number {
  const inode = `:${fs.statSync(target).ino}`;
  return fs
    .readFileSync('/proc/locks', 'utf8')
    .split('\n')
    .map((line) => line.trim().split(/\s+/))
    .filter((fields) => fields[4] === String(process.pid) && fields[5]?.endsWith(inode)).length;
}

const onLinux = process.platform === 'linux' ? it : it.skip;

describe('WAL checkpoints with a second store on the same file', () => {
  onLinux(
    "keep the other store's lock on the database file when one closes, and give back the thread's descriptor",
    async () => {
      const first = open('FULL');
      const second = openSecond();
      // Past the threshold, so that both start a checkpoint thread, which syncs through a
      // descriptor of the database file.
      await writeInBatches(first, 20, 10);
      await writeInBatches(second, 20, 10, 1_000_000);
      // An open connection in WAL mode holds a shared lock on the database file.
      expect(locksOf(file)).toBeGreaterThan(0);

      await second.close();
      // Closing a descriptor of the file would have dropped the process's locks, the first
      // store's included, and another process could then remove the WAL it still uses.
      expect(locksOf(file)).toBeGreaterThan(0);
      expect(await first.createPlant({ id: scattered(5_000_000), name: 'after' })).toEqual({
        name: 'after',
      });

      await first.close();
      store = undefined;
      expect(descriptorsOf(file)).toBe(0);
      expect(locksOf(file)).toBe(0);
    },
  );

  it('share the file with another connection that checkpoints too, losing nothing', async () => {
    const first = open('FULL');
    const second = openSecond();
    try {
      await Promise.all([
        writeInBatches(first, 100, 10),
        writeInBatches(second, 100, 10, 1_000_000),
      ]);
    } finally {
      await second.close();
    }
    const db = new Database(file, { readonly: true });
    try {
      expect(db.prepare('SELECT COUNT(*) FROM plants').pluck().get()).toBe(2000);
    } finally {
      db.close();
    }
  });
});
