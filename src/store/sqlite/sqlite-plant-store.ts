import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { shownPlant, type NewToken, type PlantStore, type TokenRecord } from '../plant-store';
import { reportingUnavailable } from '../unavailable';
import { createGroupCommit, type SyncAfterCommit } from './group-commit';
import { sqliteMigrations } from './migrations';
import {
  createWalCheckpoints,
  DEFAULT_CHECKPOINT_EVERY_WRITES,
  type WalCheckpoints,
} from './wal-checkpoints';

/**
 * The connection's page cache, in KiB: 2 MiB, about SQLite's own default of 2,000 KiB
 * (better-sqlite3 builds with 16,000). The operating system keeps the file's pages in memory
 * anyway, so a miss costs a read from there: with a million plants, 2 MiB measured as fast as
 * 8 MiB, 8 MiB as fast as 32 MiB and 128 MiB no faster; what a large store costs is the WAL and
 * the checkpoints' copies (scripts/bench/README.md, "Flat with size"). The megabytes saved went to
 * V8's young generation (README "Operating it").
 */
export const SQLITE_PAGE_CACHE_KIB = 2048;

/** `FULL` survives power loss; `NORMAL` survives a crash of the process but may lose the last commits on power loss. */
export type SqliteSynchronous = 'FULL' | 'NORMAL';

export interface SqliteStoreOptions {
  readonly path: string;
  readonly synchronous: SqliteSynchronous;
  /** How long a write waits for another process's write lock before it fails as unavailable. */
  readonly busyTimeoutMs: number;
  /**
   * Under FULL, how long a commit's sync of the WAL may take before it counts as failed, and the
   * store stops as after an I/O error (see withDeadline); absent or 0, it is waited for however
   * long it takes.
   */
  readonly syncTimeoutMs?: number;
  /** Writes between two checkpoints of the WAL (default DEFAULT_CHECKPOINT_EVERY_WRITES). */
  readonly checkpointEveryWrites?: number;
  /**
   * Checkpoints the whole WAL into the database file, synced, and empties it, before the store
   * serves: for the service's first process, which opens the file alone (see openSqlitePlantStore).
   */
  readonly checkpointAtOpen?: boolean;
  /**
   * Hears why the WAL's checkpoints went back to SQLite's own, on the event loop: the checkpoint
   * thread failed or could not start (see WalCheckpointOptions.onHandedBack).
   */
  readonly onCheckpointsHandedBack?: ((reason: string) => void) | undefined;
  /** Hears that they came back to the thread (see WalCheckpointOptions.onTakenBack). */
  readonly onCheckpointsTakenBack?: (() => void) | undefined;
}

interface TokenRow {
  id: string;
  name: string;
  created_at: number;
  last_used_at: number | null;
  revoked_at: number | null;
}

function tokenRowToRecord(row: TokenRow): TokenRecord {
  return {
    id: row.id,
    name: row.name,
    createdAt: new Date(row.created_at),
    ...(row.last_used_at === null ? {} : { lastUsedAt: new Date(row.last_used_at) }),
    ...(row.revoked_at === null ? {} : { revokedAt: new Date(row.revoked_at) }),
  };
}

function migrate(db: Database.Database): void {
  db.exec(
    'CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL, applied_at INTEGER NOT NULL)',
  );
  db.transaction(() => {
    const row = db.prepare('SELECT MAX(version) AS version FROM schema_version').get() as {
      version: number | null;
    };
    for (let version = (row.version ?? 0) + 1; version <= sqliteMigrations.length; version++) {
      db.exec(sqliteMigrations[version - 1] as string);
      db.prepare('INSERT INTO schema_version (version, applied_at) VALUES (?, ?)').run(
        version,
        Date.now(),
      );
    }
  }).immediate();
}

/**
 * `mkdir -p`, one directory at a time from the deepest one that exists. Node's own recursive
 * mkdirSync loops for ever where mkdir answers ENOENT under a directory that exists (under /proc);
 * here such an answer is thrown, like any other.
 */
function makeDirectories(directory: string): void {
  const missing: string[] = [];
  for (let dir = directory; !fs.existsSync(dir); dir = path.dirname(dir)) {
    missing.unshift(dir);
    if (path.dirname(dir) === dir) break; // a root that does not exist: mkdir says so below
  }
  for (const dir of missing) {
    try {
      fs.mkdirSync(dir);
    } catch (error) {
      // Made meanwhile by another process starting on the same path.
      if (!(error instanceof Error && 'code' in error && error.code === 'EEXIST')) throw error;
    }
  }
}

/**
 * Opens (creating if needed) the SQLite database file, applies pending migrations and returns the
 * store over it; if any step fails, the connection (and the WAL's descriptor) is closed again.
 */
export function openSqlitePlantStore(options: SqliteStoreOptions): PlantStore {
  makeDirectories(path.dirname(path.resolve(options.path)));
  const db = new Database(options.path);
  let walSync: WalSync | undefined;
  try {
    // SQLite answers with the mode it is in, which stays another one where WAL is impossible
    // (an in-memory database): the group commit syncs the WAL file, so anything else is refused.
    const journalMode = db.pragma('journal_mode = WAL', { simple: true }) as string;
    if (journalMode !== 'wal') {
      throw new Error(
        `${options.path} cannot be put in WAL mode (its journal mode is ${journalMode}).`,
      );
    }
    // FULL is kept by the store itself: the connection syncs at checkpoints only (NORMAL), and
    // each group commit syncs the WAL off the event loop before its writes are answered.
    db.pragma('synchronous = NORMAL');
    db.pragma(`busy_timeout = ${options.busyTimeoutMs}`);
    db.pragma(`cache_size = -${SQLITE_PAGE_CACHE_KIB}`);
    migrate(db);
    // After a crash, or a stop on a failed sync, SQLite rebuilds its index of the WAL from the
    // file as the kernel gives it, which may hold pages that never reached the disk (a failed
    // fdatasync leaves them in the page cache, no longer dirty). Copied into the database file,
    // synced, and the WAL emptied, all of it is on disk before a write is answered, and no later
    // write sits behind those frames in the WAL. If the sync fails, or another connection keeps
    // the checkpoint from ending, the start fails.
    if (options.checkpointAtOpen === true) checkpointWhole(db, options.path);
    const file = mainDatabaseFile(db);
    if (options.synchronous === 'FULL') walSync = openWalSync(file, options.syncTimeoutMs ?? 0);
    return createSqlitePlantStore(
      db,
      walSync,
      createWalCheckpoints(db, file, {
        everyWrites: options.checkpointEveryWrites ?? DEFAULT_CHECKPOINT_EVERY_WRITES,
        closeTimeoutMs: options.syncTimeoutMs,
        onHandedBack: options.onCheckpointsHandedBack,
        onTakenBack: options.onCheckpointsTakenBack,
      }),
    );
  } catch (error) {
    // In the order close() keeps: the connection first, then the descriptor.
    db.close();
    walSync?.close();
    throw error;
  }
}

/**
 * Copies the whole WAL into the database file, syncs it and empties the WAL, or throws: when
 * another connection holds a snapshot or the write lock past the busy time-out (a token CLI, a
 * `sqlite3` shell), SQLite answers busy rather than fail, and the start would go on over a WAL
 * not yet on disk in the database file.
 */
function checkpointWhole(db: Database.Database, file: string): void {
  const [result] = db.pragma('wal_checkpoint(TRUNCATE)') as { busy: number }[];
  if (result?.busy !== 0) {
    throw new Error(
      `Another connection to ${file} kept its WAL from being checkpointed at start; stop it and start again.`,
    );
  }
}

/**
 * The path of the file SQLite opened as the main database, which its WAL's name is made from
 * (`<that path>-wal`). SQLite resolves symbolic links in the path it is given, so through a
 * symlinked SQLITE_PATH, `${db.name}-wal` names a file SQLite never writes: either none, or a
 * stray one whose sync would make no write durable. Asked of SQLite (`PRAGMA database_list`)
 * rather than worked out with fs.realpathSync: SQLite's answer is the name it made the WAL's
 * from, whatever its rules for links, and cannot differ from it should the link change between
 * SQLite's open and ours. The checkpoint thread opens and syncs the same file.
 */
function mainDatabaseFile(db: Database.Database): string {
  const databases = db.pragma('database_list') as { name: string; file: string }[];
  const main = databases.find((database) => database.name === 'main');
  if (main === undefined || main.file === '') {
    throw new Error(`${db.name} has no database file for its WAL.`);
  }
  return main.file;
}

/**
 * synchronous=FULL, off the event loop: an fdatasync of the WAL file on libuv's thread pool after
 * each group commit. SQLite's FULL does the same sync inside the commit, holding the event loop
 * for it. Every answered write is then on disk, as with FULL; a write is visible to other requests
 * before its sync completes, but anything they answer goes through a later commit whose own sync
 * covers it.
 */
function openWalSync(databaseFile: string, timeoutMs: number): WalSync {
  // The WAL exists from the first transaction on (migrate) until the last connection closes.
  const fd = fs.openSync(`${databaseFile}-wal`, 'r');
  let running = 0;
  const sync: SyncAfterCommit = (done) => {
    running++;
    fs.fdatasync(fd, (error) => {
      running--;
      done(error);
    });
  };
  const deadline = withDeadline(sync, timeoutMs);
  return {
    sync: deadline.sync,
    pending: () => running > 0,
    close: () => {
      deadline.stop();
      fs.closeSync(fd);
    },
  };
}

/**
 * A sync that calls back with an error once it has not returned within `timeoutMs` (0: never),
 * and ignores its late return. An fdatasync cannot be cancelled, and no commit may start before
 * the one in flight is on disk, so a disk that stops answering would hold every write, and its
 * client, for as long as it does: past the deadline the sync counts as failed, and the group
 * commit stops the store as after an I/O error (its writes may yet reach the disk, or not). The
 * group commit runs one sync at a time, so one timer serves them all: re-armed as each starts, it
 * fires `timeoutMs` after the last one began, which is overdue if it has not called back by then.
 * It is judged a turn later (setImmediate runs after the turn's I/O callbacks), so that a sync
 * whose return waited behind a stalled event loop (a paused VM) is not taken for a late one.
 */
function withDeadline(
  sync: SyncAfterCommit,
  timeoutMs: number,
): { readonly sync: SyncAfterCommit; stop(): void } {
  if (timeoutMs === 0) return { sync, stop: () => undefined };
  let inFlight: ((error: Error | null) => void) | undefined;
  const overdue = () => {
    const late = inFlight;
    if (late === undefined) return;
    setImmediate(() =>
      late(
        Object.assign(
          new Error(
            `The sync of the WAL did not return within ${timeoutMs} ms (SQLITE_SYNC_TIMEOUT_MS): the disk counts as failed.`,
          ),
          { code: 'ETIMEDOUT' },
        ),
      ),
    );
  };
  const deadline = setTimeout(overdue, timeoutMs).unref();
  return {
    sync(done) {
      const answer = (error: Error | null) => {
        if (inFlight !== answer) return;
        inFlight = undefined;
        done(error);
      };
      inFlight = answer;
      deadline.refresh();
      sync(answer);
    },
    stop: () => clearTimeout(deadline),
  };
}

/** The WAL sync of synchronous=FULL, whether one is still running, and how to release its file descriptor. */
interface WalSync {
  readonly sync: SyncAfterCommit;
  pending(): boolean;
  close(): void;
}

/** The PlantStore over an open, migrated better-sqlite3 database; writes are group-committed. */
export function createSqlitePlantStore(
  db: Database.Database,
  walSync?: WalSync,
  checkpoints?: WalCheckpoints,
): PlantStore {
  const insertPlant = db.prepare(
    'INSERT INTO plants (id, name, tag) VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING',
  );
  const deletePlant = db.prepare('DELETE FROM plants WHERE id = ?');
  const insertToken = db.prepare(
    'INSERT INTO tokens (id, name, hash, created_at) VALUES (@id, @name, @hash, @createdAt)',
  );
  const tokenColumns = 'id, name, created_at, last_used_at, revoked_at';
  const findActiveToken = db.prepare(
    `SELECT ${tokenColumns} FROM tokens WHERE hash = ? AND revoked_at IS NULL`,
  );
  const touchToken = db.prepare('UPDATE tokens SET last_used_at = ? WHERE id = ?');
  const listTokens = db.prepare(`SELECT ${tokenColumns} FROM tokens ORDER BY created_at, id`);
  const revokeToken = db.prepare(
    'UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL',
  );
  const countActiveTokens = db
    .prepare('SELECT COUNT(*) FROM tokens WHERE revoked_at IS NULL')
    .pluck();
  const ping = db.prepare('SELECT 1').pluck();
  const dataVersion = db.prepare('PRAGMA data_version').pluck();
  const { write, settle, totals, stopped, assertWriting, hasStopped } = createGroupCommit(
    db,
    walSync?.sync,
    checkpoints,
  );
  // The token change watch: data_version moves when another connection (another process, the token
  // CLI) commits anything; this connection's own token writes move tokenEpoch directly.
  let seenDataVersion = dataVersion.get() as number;
  let tokenEpoch = 0;
  const changingTokens = <T>(run: () => T) =>
    write(() => {
      tokenEpoch++;
      return run();
    });

  return reportingUnavailable(
    {
      async createPlant(plant) {
        const { changes } = await write(() =>
          insertPlant.run(plant.id, plant.name, plant.tag ?? null),
        );
        if (changes === 0) return undefined;
        return shownPlant(plant);
      },
      async deletePlant(id) {
        return (await write(() => deletePlant.run(id))).changes === 1;
      },
      async insertToken(token: NewToken) {
        await changingTokens(() =>
          insertToken.run({ ...token, createdAt: token.createdAt.getTime() }),
        );
      },
      async findActiveToken(hash) {
        const row = findActiveToken.get(hash) as TokenRow | undefined;
        return row === undefined ? undefined : tokenRowToRecord(row);
      },
      async touchToken(id, at) {
        await write(() => touchToken.run(at.getTime(), id));
      },
      async listTokens() {
        return (listTokens.all() as TokenRow[]).map(tokenRowToRecord);
      },
      async revokeToken(id, at) {
        return (await changingTokens(() => revokeToken.run(at.getTime(), id))).changes === 1;
      },
      async countActiveTokens() {
        return countActiveTokens.get() as number;
      },
      async ping() {
        assertWriting();
        ping.get();
      },
      async close() {
        await settle();
        // Stopped on a failed sync, the store leaves its connection, and the descriptors whose
        // close would drop SQLite's locks, to the process's exit: closed, the file's last
        // connection checkpoints the WAL and deletes it, over copies that may not be on disk.
        // Left as it is, the WAL is what the next start recovers from (see openSqlitePlantStore).
        // So does the checkpoint thread, whose pass may wait on the disk that failed, or stopped
        // answering: the exit ends it as a crash would, and its connection too.
        if (hasStopped()) return;
        // A pass still stuck on the disk past the deadline leaves the store as a stop does.
        if ((await checkpoints?.close()) === false) return;
        db.close();
        checkpoints?.release();
        walSync?.close();
      },
      tokenChanges: {
        version() {
          const current = dataVersion.get() as number;
          if (current !== seenDataVersion) {
            seenDataVersion = current;
            tokenEpoch++;
          }
          return tokenEpoch;
        },
      },
      commitTotals: totals,
      offLoopDiskCalls: {
        pending: () => walSync?.pending() === true || checkpoints?.passing() === true,
      },
      ...(checkpoints === undefined
        ? {}
        : { walCheckpoints: { handedBack: checkpoints.handedBack } }),
      stopped,
    },
    isUnavailable,
  );
}

/**
 * SQLite's result codes that mean "not now" rather than "never", as the PostgreSQL store's
 * SQLSTATE classes do (its 53, insufficient resources, holds disk full and out of memory):
 * - BUSY, LOCKED: another connection holds the lock past busy_timeout; PROTOCOL: a WAL lock race
 *   SQLite lost for seconds on end, the same wait by another name;
 * - FULL: the disk (or max_page_count) is full;
 * - READONLY*: the file, its directory or its file system refuses writes (ext4 remounts itself
 *   read-only after errors), or the file was moved away (READONLY_DBMOVED);
 * - IOERR*: the operating system failed a read, write or lock (IOERR_NOMEM included);
 * - NOMEM: SQLite could not allocate.
 * Each fails its transaction whole (the transaction is rolled back, and WAL frames without a
 * commit record are ignored), so the writes already answered stand, and the store writes again once
 * the lock, the space, the memory or the disk is back: unlike a failed sync of the WAL, after which
 * the group commit stops the store, nothing here leaves an answered write in doubt. (The store's
 * connection never syncs inside a COMMIT, as it runs at NORMAL; and SQLite ignores the errors of
 * its own checkpoints after a COMMIT.) Everything else stays as it is, a 500 that logs its stack:
 * CONSTRAINT, ERROR, MISUSE, RANGE and MISMATCH mean a bug of the store, and CORRUPT, NOTADB and
 * CANTOPEN an operator's work, which no retry replaces.
 */
const UNAVAILABLE_CODE = /^SQLITE_(BUSY|LOCKED|PROTOCOL|FULL|READONLY|IOERR|NOMEM)/;

function isUnavailable(error: unknown): boolean {
  // By code, not by class: the native addon keeps the SqliteError class of the first module instance that loaded it.
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && UNAVAILABLE_CODE.test(code);
}
