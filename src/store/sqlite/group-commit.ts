import type Database from 'better-sqlite3';

interface PendingWrite {
  readonly run: () => unknown;
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: unknown) => void;
}

/** Runs writes in shared transactions; see createGroupCommit. */
export interface GroupCommit {
  /** Queues `run` for the next transaction; settles once that transaction has committed. */
  write<T>(run: () => T): Promise<T>;
  /** Commits whatever is queued, now. */
  flush(): void;
}

/**
 * Group commit: writes that arrive in the same turn of the event loop share one transaction, so
 * with synchronous=FULL they share one fsync; each caller is answered only after the commit that
 * holds its write. Writes run in arrival order. If the transaction fails, every write in it fails.
 */
export function createGroupCommit(db: Database.Database): GroupCommit {
  let queue: PendingWrite[] = [];
  let scheduled: NodeJS.Immediate | undefined;
  const commitAll = db.transaction((batch: readonly PendingWrite[]) =>
    batch.map((write) => write.run()),
  );

  const flush = () => {
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
    batch.forEach((write, i) => write.resolve(results[i]));
  };

  return {
    write<T>(run: () => T) {
      return new Promise<T>((resolve, reject) => {
        queue.push({ run, resolve: resolve as (value: unknown) => void, reject });
        // setImmediate, not a microtask: requests whose bytes arrived in the same poll join the batch.
        scheduled ??= setImmediate(flush);
      });
    },
    flush,
  };
}
