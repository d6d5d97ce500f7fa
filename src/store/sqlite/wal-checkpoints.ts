import fs from 'node:fs';
import { Worker } from 'node:worker_threads';
import type Database from 'better-sqlite3';
import { errorText } from '../../error-text';
import type { WalCheckpointState } from '../plant-store';

/**
 * Writes between two restarts of the WAL. With scattered ids a write adds about 1.3 pages to the
 * WAL, so the file grows to about 22,000 pages (90 MB) and stays that size while the store runs.
 */
export const DEFAULT_CHECKPOINT_EVERY_WRITES = 16000;

/**
 * The end copies on the event loop what was committed during the thread's last pass: another pass
 * runs first when more writes than this were (at most MAX_PASSES in all).
 */
const FEW_FOR_THE_END = 400;
const MAX_PASSES = 3;

/**
 * Past this many times the threshold, commits wait for the checkpoint under way (or, with none
 * under way, the store's connection checkpoints at once), so the WAL stays bounded even when the
 * thread falls behind.
 */
const HARD_LIMIT_FACTOR = 3;

/**
 * After a hand-back to SQLite, the thread is tried again once this many times `everyWrites` more
 * writes are committed, twice as many after each failure in a row, up to MAX_RETRY_FACTOR times
 * (about a million writes at the default): a want of descriptors or of threads passes, and a thread
 * that fails every time costs a warning a million writes.
 */
const FIRST_RETRY_FACTOR = 2;
const MAX_RETRY_FACTOR = 64;

export interface WalCheckpointOptions {
  /** Writes between two checkpoints (see DEFAULT_CHECKPOINT_EVERY_WRITES). */
  readonly everyWrites: number;
  /** How long close waits for a pass under way (0 or absent: as long as it takes). */
  readonly closeTimeoutMs?: number | undefined;
  /**
   * Hears that the checkpoint thread failed or could not start, with what failed and why: SQLite's
   * own checkpoints, inside the commits on the event loop, take over until the thread works again,
   * and meanwhile the tail of the requests' latency grows with the table (see
   * createWalCheckpoints). Called once a hand-back, after a commit or on the thread's failure;
   * what it throws is dropped.
   */
  readonly onHandedBack?: ((reason: string) => void) | undefined;
  /**
   * Hears that the thread, tried again after a hand-back, has seen a checkpoint through: checkpoints
   * are off the event loop again. Called once a hand-back that ends so; what it throws is dropped.
   */
  readonly onTakenBack?: (() => void) | undefined;
}

/** Hooks the group commit calls around each transaction; see createWalCheckpoints. */
export interface WalCheckpoints extends WalCheckpointState {
  /**
   * Before a transaction: the end of a checkpoint when due (a promise when it must wait for the
   * thread's pass). Throws (or rejects) once the thread's sync of the database file has failed:
   * the store must stop writing (see createWalCheckpoints).
   */
  beforeCommit(): Promise<void> | undefined;
  /**
   * Resolves with the error once the thread's sync of the database file has failed, at once,
   * whether or not a write follows: the store stops then (see createWalCheckpoints).
   */
  readonly syncFailed: Promise<Error>;
  /** After a transaction of `writes` writes (and its sync): starts a background checkpoint when due. */
  afterCommit(writes: number): void;
  /** Whether the thread is in a pass (which a disk that stopped answering may hold for good). */
  passing(): boolean;
  /**
   * Waits for a background pass under way and stops the thread; resolves false, leaving the
   * thread as it is, when the pass has not ended within the deadline of createWalCheckpoints (a
   * disk that stopped answering holds its sync), and true once the thread has stopped.
   */
  close(): Promise<boolean>;
  /**
   * Gives back the thread's descriptor of the database file (see databaseFileDescriptors). Only
   * after the store's connection is closed.
   */
  release(): void;
}

interface PassResult {
  readonly busy: boolean;
  /** Frames in the WAL, and how many of them are copied into the database file. */
  readonly log: number;
  readonly checkpointed: number;
}

/**
 * A failed pass, with the error's message and code (SQLite's, `SQLITE_IOERR_...`, or the system's);
 * `syncFailed` when the checkpoint copied frames and their sync then failed.
 */
type Reply =
  PassResult | { readonly error: string; readonly code?: string; readonly syncFailed?: boolean };

/**
 * The checkpoint thread's code: its own connection to the file, one PASSIVE checkpoint per message,
 * then an fdatasync of the database file (a failure of which the reply marks `syncFailed`). SQLite
 * syncs the database file only when a checkpoint copies the WAL to its very end, which a pass never
 * does while commits go on; the end on the store's connection did, and so flushed the whole pass's
 * scattered pages while it held the event loop (with a million plants, 80 to 110 ms of its 90 to
 * 120 on the benchmark's slowest machine). Synced here, off the event loop, the end flushes only
 * the pages it copies itself. The descriptor is the main thread's (workerData.fd; see
 * databaseFileDescriptors), never closed here. Plain JavaScript run with `eval`, so that the same
 * code serves the compiled service and the TypeScript tests.
 */
const THREAD_SOURCE = `
const fs = require('node:fs');
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.path, { fileMustExist: true });
db.pragma('synchronous = NORMAL');
db.pragma('cache_size = -256');
const checkpoint = db.prepare('PRAGMA wal_checkpoint(PASSIVE)');
parentPort.on('message', (message) => {
  if (message === 'close') {
    db.close();
    parentPort.close();
    return;
  }
  let copied = false;
  try {
    const row = checkpoint.get();
    copied = row.checkpointed > 0;
    if (copied) fs.fdatasyncSync(workerData.fd);
    parentPort.postMessage({ busy: row.busy !== 0, log: row.log, checkpointed: row.checkpointed });
  } catch (error) {
    const code = error && typeof error.code === 'string' ? error.code : undefined;
    parentPort.postMessage({ error: String(error && error.message), code, syncFailed: copied });
  }
});
`;

/**
 * Descriptors of database files for the checkpoint thread's syncs, one per file and process,
 * shared by the stores of this process over that file. Closing any descriptor of a file drops
 * every POSIX lock the process holds on it, SQLite's included: an open connection in WAL mode
 * holds a shared lock on the database file, and once it is gone another process's last close may
 * checkpoint and delete the WAL this one still uses. SQLite guards its own descriptors against
 * that; this one is closed only when the last store of the process over the file has given it
 * back, each after closing its connection.
 */
const databaseFileDescriptors = new Map<string, { readonly fd: number; users: number }>();

/** One store's hold on a descriptor of databaseFileDescriptors; `release` once, as WalCheckpoints does. */
function acquireDatabaseFile(file: string): { readonly fd: number; release(): void } {
  const { dev, ino } = fs.statSync(file);
  const key = `${dev}:${ino}`;
  let entry = databaseFileDescriptors.get(key);
  if (entry === undefined) {
    entry = { fd: fs.openSync(file, 'r'), users: 0 };
    databaseFileDescriptors.set(key, entry);
  }
  entry.users++;
  const held = entry;
  return {
    fd: held.fd,
    release() {
      if (--held.users > 0) return;
      databaseFileDescriptors.delete(key);
      fs.closeSync(held.fd);
    },
  };
}

/**
 * What failed, for WalCheckpointOptions.onHandedBack: the step, what the error says, and its code
 * where that does not say it (Node's ERR_WORKER_INIT_FAILED says only `EAGAIN`, say).
 */
function failure(step: string, error: unknown): string {
  const text = errorText(error);
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && !text.includes(code)
    ? `${step}: ${text} (${code})`
    : `${step}: ${text}`;
}

/** Whether `promise` settles within `ms` (always, when `ms` is 0): true once it has, false at the deadline. */
async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  if (ms === 0) {
    await promise;
    return true;
  }
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<false>((resolve) => (timer = setTimeout(resolve, ms, false)));
  try {
    return await Promise.race([promise.then(() => true), deadline]);
  } finally {
    clearTimeout(timer);
  }
}

/** One thread with its own connection that runs a PASSIVE checkpoint per call. */
class CheckpointThread {
  private readonly worker: Worker;
  private pending: ((reply: Reply) => void) | undefined;
  /** It failed (an `error` event, its exit to follow) or exited: it runs no more passes. */
  private ended = false;
  private readonly exit: Promise<void>;

  constructor(file: string, fd: number, onFailure: (reason: string) => void) {
    this.worker = new Worker(THREAD_SOURCE, {
      eval: true,
      workerData: { path: file, fd, driver: require.resolve('better-sqlite3') },
      // It holds a connection and a few statements: a small heap is plenty.
      resourceLimits: { maxYoungGenerationSizeMb: 1, maxOldGenerationSizeMb: 16 },
    });
    this.worker.on('message', (reply: Reply) => this.answer(reply));
    this.worker.on('error', (error) => {
      this.ended = true;
      onFailure(failure('the checkpoint thread failed', error));
    });
    this.exit = new Promise((resolve) =>
      this.worker.once('exit', (code) => {
        this.ended = true;
        this.answer({ error: `the checkpoint thread exited (${code})` });
        resolve();
      }),
    );
  }

  private answer(reply: Reply): void {
    const pending = this.pending;
    this.pending = undefined;
    pending?.(reply);
  }

  /** Whether the thread has failed or exited: it runs no more passes. */
  get over(): boolean {
    return this.ended;
  }

  /** Whether a pass has been asked for and not answered. */
  get passing(): boolean {
    return this.pending !== undefined;
  }

  /** Runs one PASSIVE checkpoint on the thread's connection. */
  pass(): Promise<Reply> {
    if (this.ended) return Promise.resolve({ error: 'the checkpoint thread has exited' });
    return new Promise((resolve) => {
      this.pending = resolve;
      this.worker.postMessage('pass');
    });
  }

  async close(): Promise<void> {
    if (!this.ended) this.worker.postMessage('close');
    await this.exit;
  }
}

/**
 * Checkpoints of the store's WAL, mostly off the event loop; `file` is the database file as SQLite
 * opened it (its links resolved), which the thread opens and syncs. SQLite's own checkpoint runs
 * inside the COMMIT that takes the WAL past 1,000 pages, on the event loop, and with scattered ids
 * it copies and syncs nearly one page per write it covers: with a million plants, 26 ms of every
 * 1,000 writes (`npm run bench:checkpoints`). Here the store's connection never checkpoints by
 * itself (`wal_autocheckpoint = 0`); after `everyWrites` writes a thread with its own connection
 * copies the WAL into the database file while commits go on (a PASSIVE checkpoint takes no lock
 * that writers need). Then, before the next commit, the store's connection copies the few hundred
 * frames committed meanwhile, and that commit restarts the WAL from its beginning. The bulk of the
 * copying and syncing leaves the event loop, and a larger WAL copies each page once for all the
 * writes to it: with a million plants, the checkpoints cost 2.5 µs of CPU per write at one per
 * 16,000 writes, 3.6 µs at one per 8,000 and 4.8 µs at SQLite's every 1,000 pages
 * (`npm run bench:checkpoints`). The end holds the event loop while it copies and syncs the frames
 * committed during the last pass. The thread syncs the database file after each of its passes (see
 * THREAD_SOURCE), and runs another pass when many writes came in during one, so with a million
 * plants the end takes 1 to 11 ms, against 74 to 123 ms when it flushed the whole pass
 * (scripts/bench/README.md, "What changed"). (The end cannot be left to the thread: while commits
 * go on, each pass leaves new frames behind; and a thread's pass with commits held measured slower,
 * since it shares the server's core with the event loop.)
 *
 * Durability is SQLite's: each checkpoint syncs the WAL before it copies and the database file
 * before it lets the WAL restart (the thread's own sync only moves most of that work earlier).
 * If the thread fails, the connection checkpoints by itself again as SQLite does by default, until
 * the thread, tried again after FIRST_RETRY_FACTOR times `everyWrites` writes (twice as many after
 * each failure in a row, up to MAX_RETRY_FACTOR), has seen a checkpoint through to its end. The
 * thread starts at the first checkpoint, so a store that writes little never starts it.
 *
 * Except when the thread's sync of the database file fails: a pass that stops short of the WAL's
 * end marks its frames copied without syncing the database file (SQLite syncs it only when a
 * checkpoint reaches the end), so the thread's sync is the only one those copies get. If it fails,
 * the kernel may have dropped the pages it could not write and will report the next sync as a
 * success, and a later checkpoint would let the WAL restart over frames whose copies are not on
 * disk, losing answered writes. So `syncFailed` resolves at once, the group commit stops the store
 * as it does when the WAL's own sync fails, and beforeCommit throws from then on; a restart
 * recovers from the WAL, which still holds those frames.
 *
 * `closeTimeoutMs` (0: none) bounds how long close waits for a pass under way: a disk that stopped
 * answering would hold its sync, and a shutdown with it, for good (see close). `onHandedBack`
 * hears why checkpoints went back to SQLite, and `onTakenBack` that they came back to the thread
 * (see WalCheckpointOptions).
 */
export function createWalCheckpoints(
  db: Database.Database,
  file: string,
  { everyWrites, closeTimeoutMs = 0, onHandedBack, onTakenBack }: WalCheckpointOptions,
): WalCheckpoints {
  db.pragma('wal_autocheckpoint = 0');
  let thread: CheckpointThread | undefined;
  let databaseFile: ReturnType<typeof acquireDatabaseFile> | undefined;
  /** Checkpoints are SQLite's own since the thread failed; `writes` then counts toward a retry. */
  let failed = false;
  let retryFactor = FIRST_RETRY_FACTOR;
  let retryAfterWrites = 0;
  /** The thread is being tried again: the first checkpoint it sees through takes them back. */
  let retrying = false;
  let syncFailure: Error | undefined;
  let reportSyncFailure: (error: Error) => void = () => undefined;
  const syncFailed = new Promise<Error>((resolve) => (reportSyncFailure = resolve));
  let writes = 0;
  let phase: 'idle' | 'background' | 'tail' = 'idle';
  let background: Promise<void> = Promise.resolve();

  /**
   * Calls a listener. Its failure is not the store's: it runs after commits whose writes are on
   * disk, and must not turn their answers into errors.
   */
  const tell = (listener: () => void) => {
    try {
      listener();
    } catch {
      // Dropped (see above).
    }
  };

  const fallBack = (reason: string) => {
    if (failed) return;
    failed = true;
    retrying = false;
    phase = 'idle';
    writes = 0;
    retryAfterWrites = retryFactor * everyWrites;
    retryFactor = Math.min(2 * retryFactor, MAX_RETRY_FACTOR);
    db.pragma('wal_autocheckpoint = 1000');
    if (onHandedBack !== undefined) tell(() => onHandedBack(reason));
  };

  /**
   * After a hand-back, once enough writes are committed and no pass of the thread that failed is
   * pending: the store's connection stops checkpointing by itself, and a checkpoint is due now. A
   * thread that failed or exited is replaced; one whose pass failed (an error of SQLite's, its
   * connection open) is asked again.
   */
  const retry = (): boolean => {
    if (writes < retryAfterWrites || thread?.passing === true) return false;
    if (thread?.over === true) thread = undefined;
    failed = false;
    retrying = true;
    db.pragma('wal_autocheckpoint = 0');
    writes = everyWrites;
    return true;
  };

  /**
   * Passes on the thread until the writes committed during the last one are few enough for the
   * end (or MAX_PASSES); a failed pass hands checkpoints back to SQLite.
   */
  const pass = async (current: CheckpointThread) => {
    for (let passes = 0; passes < MAX_PASSES; passes++) {
      const writesBefore = writes;
      const reply = await current.pass();
      if ('error' in reply) {
        // A failed sync of the database file stops the store (see above). Any other failure
        // leaves no copy unsynced: the connection takes over checkpoints, and an I/O error is
        // for the next commit to report.
        if (reply.syncFailed === true) {
          syncFailure = new Error(reply.error);
          reportSyncFailure(syncFailure);
          return;
        }
        const error = Object.assign(new Error(reply.error), { code: reply.code });
        return fallBack(failure('a checkpoint on the thread failed', error));
      }
      if (writes - writesBefore <= FEW_FOR_THE_END) return;
    }
  };

  /**
   * The end of a checkpoint, on the store's connection: it copies what was committed during the
   * thread's pass (a few hundred frames), so that the next transaction restarts the WAL.
   */
  const finish = () => {
    if (syncFailure !== undefined) throw syncFailure;
    if (!failed) {
      try {
        db.pragma('wal_checkpoint(PASSIVE)');
      } catch (error) {
        // Not the writes' failure: SQLite's own checkpoints take over, and COMMIT reports what persists.
        fallBack(failure('the end of a checkpoint failed', error));
      }
    }
    if (retrying && !failed) {
      // A whole checkpoint again (the thread's passes and this end): the thread is back.
      retrying = false;
      retryFactor = FIRST_RETRY_FACTOR;
      if (onTakenBack !== undefined) tell(onTakenBack);
    }
    phase = 'idle';
    writes = 0;
  };

  return {
    syncFailed,
    beforeCommit() {
      if (syncFailure !== undefined) throw syncFailure;
      if (failed || (phase !== 'tail' && writes < HARD_LIMIT_FACTOR * everyWrites)) return;
      if (phase === 'background') return background.then(finish);
      finish();
      return undefined;
    },
    afterCommit(count) {
      writes += count;
      if (failed && !retry()) return;
      if (phase !== 'idle' || writes < everyWrites) return;
      // No descriptor (too many open files) or no thread (the limit of the process's threads,
      // ERR_WORKER_INIT_FAILED): SQLite's own checkpoints take over. Nothing here may throw, as it
      // runs after the commit: its writes are on disk and must be answered as such.
      try {
        databaseFile ??= acquireDatabaseFile(file);
      } catch (error) {
        fallBack(failure('opening the database file for the checkpoint thread', error));
        return;
      }
      try {
        thread ??= new CheckpointThread(file, databaseFile.fd, fallBack);
      } catch (error) {
        fallBack(failure('starting the checkpoint thread', error));
        return;
      }
      phase = 'background';
      background = pass(thread).then(() => {
        if (phase === 'background') phase = 'tail';
      });
    },
    passing: () => thread?.passing === true,
    // Until a retried thread has seen a checkpoint through, they are still SQLite's.
    handedBack: () => failed || retrying,
    async close() {
      if (!(await settlesWithin(background, closeTimeoutMs))) return false;
      await thread?.close();
      return true;
    },
    release() {
      databaseFile?.release();
      databaseFile = undefined;
    },
  };
}
