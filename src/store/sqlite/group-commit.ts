import { promisify } from 'node:util';
import type Database from 'better-sqlite3';
import { createBatcher } from '../batcher';
import { StoreUnavailableError, type CommitTotals } from '../plant-store';
import type { WalCheckpoints } from './wal-checkpoints';

/** Runs writes in shared transactions; see createGroupCommit. */
export interface GroupCommit {
  /** Queues `run` for the next transaction; settles once that transaction has committed (and synced). */
  write<T>(run: () => T): Promise<T>;
  /** Commits whatever is queued and resolves once every commit made so far has been synced. */
  settle(): Promise<void>;
  /** The commits answered so far, their writes and the time of their syncs; updated in place. */
  readonly totals: CommitTotals;
  /** Resolves with the error once a sync has failed: from then on every write fails (see createGroupCommit). */
  readonly stopped: Promise<StoreUnavailableError>;
  /** Throws that error once a sync has failed. */
  assertWriting(): void;
  /** Whether a sync has failed, from that moment on. */
  hasStopped(): boolean;
}

/** Makes what is committed so far durable, off the event loop, then calls back (with an error if it could not). */
export type SyncAfterCommit = (done: (error: Error | null) => void) => void;

/**
 * Group commit: writes that arrive in the same turn of the event loop share one transaction, so
 * they share one sync; each caller is answered only after the commit that holds its write.
 * Writes run in arrival order. If the transaction fails, every write in it fails.
 *
 * Given `syncAfterCommit`, each commit is answered only after that sync, and while a sync is in
 * flight no other commit starts: the writes that arrive meanwhile wait and form the next batch,
 * so batches grow with the time a sync takes, as they do when the commit itself syncs and holds
 * the event loop. That batch is committed, and its sync begun, before the writes of the commit
 * before it are answered, so that the disk works while the event loop answers them (unless the
 * commit must first wait for a checkpoint's pass to end, which is then what overlaps them). If a
 * sync fails, every write of that commit fails, since it may not survive a power loss, and so does
 * every later write: after a failed fdatasync the kernel may have dropped the pages it could not
 * write and report the next sync as a success, so no later commit could be trusted to be on disk.
 * The writes fail as unavailable (StoreUnavailableError), `stopped` resolves, and only a restart,
 * which recovers from what is on disk, makes the store write again.
 *
 * Given `checkpoints`, the WAL is checkpointed by them (see createWalCheckpoints) between commits;
 * a failed sync of the database file there stops the store the same way, as soon as it is
 * reported, since the WAL must not restart over frames whose copies may not be on disk.
 */
export function createGroupCommit(
  db: Database.Database,
  syncAfterCommit?: SyncAfterCommit,
  checkpoints?: WalCheckpoints,
): GroupCommit {
  const commitAll = db.transaction((batch: readonly (() => unknown)[]) =>
    batch.map((run) => run()),
  );
  const sync = syncAfterCommit === undefined ? undefined : promisify(syncAfterCommit);
  const totals = { commits: 0, writes: 0, syncSeconds: 0 };
  let failure: StoreUnavailableError | undefined;
  let reportStop: (error: StoreUnavailableError) => void = () => undefined;
  const stopped = new Promise<StoreUnavailableError>((resolve) => (reportStop = resolve));
  const assertWriting = () => {
    if (failure !== undefined) throw failure;
  };
  const halt = (cause: unknown): StoreUnavailableError => {
    failure = new StoreUnavailableError({ cause });
    reportStop(failure);
    return failure;
  };
  const stop = (cause: unknown): never => {
    throw halt(cause);
  };
  // A failed sync of the database file stops the store as soon as the thread reports it, not at
  // the next write: /readyz turns 503 and the process stops even when no write comes.
  void checkpoints?.syncFailed.then((cause) => {
    if (failure === undefined) halt(cause);
  });
  // One commit at a time: a batch commits as soon as it is sent, and is answered, and the next
  // batch sent, only after its sync.
  const commits = createBatcher(
    async (batch: readonly (() => unknown)[]) => {
      assertWriting();
      try {
        const checkpointEnd = checkpoints?.beforeCommit();
        if (checkpointEnd !== undefined) await checkpointEnd;
      } catch (error) {
        // Only a failed sync of the database file throws here (see WalCheckpoints.beforeCommit).
        stop(error);
      }
      const results = commitAll.immediate(batch);
      if (sync !== undefined) {
        const syncStarted = performance.now();
        try {
          await sync();
        } catch (error) {
          stop(error);
        }
        totals.syncSeconds += (performance.now() - syncStarted) / 1000;
      }
      checkpoints?.afterCommit(batch.length);
      totals.commits++;
      totals.writes += batch.length;
      return results;
    },
    // With a sync, the next commit is sent before this one's writes are answered, so that its sync
    // runs while the event loop answers them (see BatcherOptions.answerAfterNextSend).
    { maxInFlight: 1, maxBatch: Infinity, answerAfterNextSend: sync !== undefined },
  );
  return {
    write: <T>(run: () => T) => commits.submit(run) as Promise<T>,
    settle: () => commits.drain(),
    totals,
    stopped,
    assertWriting,
    hasStopped: () => failure !== undefined,
  };
}
