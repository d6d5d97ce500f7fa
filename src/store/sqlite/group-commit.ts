import type Database from 'better-sqlite3';

interface PendingWrite {
  readonly run: () => unknown;
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: unknown) => void;
}

/** Runs writes in shared transactions; see createGroupCommit. */
export interface GroupCommit {
  /** Queues `run` for the next transaction; settles once that transaction has committed (and synced). */
  write<T>(run: () => T): Promise<T>;
  /** Commits whatever is queued and resolves once every commit made so far has been synced. */
  settle(): Promise<void>;
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
 * the event loop. If the sync fails, every write of that commit fails, since it may not survive
 * a power loss.
 */
export function createGroupCommit(
  db: Database.Database,
  syncAfterCommit?: SyncAfterCommit,
): GroupCommit {
  let queue: PendingWrite[] = [];
  let scheduled: NodeJS.Immediate | undefined;
  let syncing = false;
  let settled: (() => void)[] = [];
  const commitAll = db.transaction((batch: readonly PendingWrite[]) =>
    batch.map((write) => write.run()),
  );

  const schedule = () => {
    // setImmediate, not a microtask: requests whose bytes arrived in the same poll join the batch.
    if (!syncing) scheduled ??= setImmediate(flush);
  };

  const afterSync = () => {
    syncing = false;
    // While settle() waits (the store is closing), what queued up is committed at once.
    if (settled.length > 0) flush();
    else if (queue.length > 0) schedule();
    if (syncing || queue.length > 0) return;
    const waiting = settled;
    settled = [];
    for (const resolve of waiting) resolve();
  };

  function flush(): void {
    if (scheduled !== undefined) clearImmediate(scheduled);
    scheduled = undefined;
    const batch = queue;
    queue = [];
    if (batch.length === 0) return;
    let results: unknown[];
    try {
      results = commitAll.immediate(batch);
    } catch (error) {
      for (const write of batch) write.reject(error);
      return;
    }
    if (syncAfterCommit === undefined) {
      batch.forEach((write, i) => write.resolve(results[i]));
      return;
    }
    syncing = true;
    syncAfterCommit((error) => {
      if (error !== null) for (const write of batch) write.reject(error);
      else batch.forEach((write, i) => write.resolve(results[i]));
      afterSync();
    });
  }

  return {
    write<T>(run: () => T) {
      return new Promise<T>((resolve, reject) => {
        queue.push({ run, resolve: resolve as (value: unknown) => void, reject });
        schedule();
      });
    },
    settle() {
      if (!syncing) flush();
      if (!syncing) return Promise.resolve();
      return new Promise<void>((resolve) => settled.push(resolve));
    },
  };
}
