import cluster, { type Worker } from 'node:cluster';
import type { Logger } from './logger';

/** What the primary tells the process around it, and learns from it. */
export interface SupervisorHooks {
  /**
   * The first worker listens, on this port: the service serves. A rejection (which the hook
   * reports) stops every worker, and the primary exits with code 1.
   */
  onFirstListening(port: number): Promise<void>;
  /** Installs `stop` for the process's stop signals. */
  onStopSignal(stop: (signal: string) => void): void;
}

/** What a worker sends the primary once its store has stopped (see reportStoreStopped). */
const STORE_STOPPED = 'plant-store: the store stopped';
/** What the primary then sends every worker (see onStopLeavingStore). */
const STOP_LEAVING_STORE = 'plant-store: stop, leaving the store as it is';

/**
 * Tells the primary that this worker's store has stopped for good (a failed sync): the primary
 * then stops every worker (see supervise). Does nothing outside a cluster.
 */
export function reportStoreStopped(): void {
  // With a callback, a channel already closed (the primary gone) is not an uncaught 'error'.
  if (cluster.isWorker) process.send?.(STORE_STOPPED, undefined, undefined, () => undefined);
}

/**
 * Calls `stop` in a worker when the primary says another worker's store stopped: the worker is to
 * drain and exit without closing its store, whose close, the file's last, would checkpoint the WAL
 * and delete it (see supervise). Does nothing outside a cluster.
 */
export function onStopLeavingStore(stop: () => void): void {
  if (!cluster.isWorker) return;
  process.on('message', (message) => {
    if (message === STOP_LEAVING_STORE) stop();
  });
}

/**
 * A replacement for a worker that failed is started after this, doubled with each failure in a row
 * up to a limit.
 */
const RESTART_DELAY_MS = { first: 500, max: 30_000 };

/**
 * A worker that has listened this long served well: when it dies, it is replaced at once and the
 * failures in a row start again from none. One that dies sooner counts as a failure.
 */
const SERVED_WELL_MS = 10_000;

/**
 * Runs `workers` processes that share `port` and stops them all on a stop signal (exit code 0).
 * The port is a real one, not 0: the primary closes it whenever every worker has exited, and the
 * next worker to listen opens it again, which with 0 would be another port than the one announced.
 * A worker that dies after it served well is replaced at once. One that dies before it listened
 * failed at start: before the service ever listened (the port taken, say), every replacement would
 * fail the same way, so all stop with exit code 1; once the service serves, the failure is the
 * moment's (the database unreachable), so the others go on and the replacement is started again
 * after a delay that doubles with each failure in a row. So is one that dies soon after it
 * listened (a disk that fails every write stops each worker at its first write): replaced at once,
 * such workers would restart in a loop as fast as they start. A worker whose store stopped (a sync
 * that failed: the disk may have dropped what it was given) stops them all, with exit code 1: the
 * other processes over the same SQLite file, and a replacement, would go on over a WAL index that
 * counts as copied what may never have reached the disk, and a later checkpoint could let the WAL
 * restart over it. Each drains and exits without closing its store: the file's last close would
 * checkpoint the WAL and delete it. Started again together, by the process's own supervisor, the
 * first to open the file rebuilds that index from the WAL and checkpoints it whole (see
 * openSqlitePlantStore).
 */
export function supervise(
  { workers, port }: { workers: number; port: number },
  logger: Logger,
  hooks: SupervisorHooks,
): Promise<number> {
  let stopping = false;
  let announced = false;
  let failures = 0;
  /** When each worker that listened did so (ms since the epoch), by worker id. */
  const listenedAt = new Map<number, number>();
  const fork = () => {
    if (!stopping) cluster.fork({ PORT: String(port) });
  };
  /** Starts a replacement after the delay for one more failure in a row; returns that delay. */
  const forkLater = (): number => {
    const retryInMs = Math.min(RESTART_DELAY_MS.max, RESTART_DELAY_MS.first * 2 ** failures++);
    setTimeout(fork, retryInMs);
    return retryInMs;
  };
  return new Promise<number>((resolve) => {
    let exitCode = 0;
    const running = () =>
      Object.values(cluster.workers ?? {}).filter((worker) => worker !== undefined);
    /**
     * Stops every worker: with SIGTERM, or, given the worker whose store stopped, every other
     * with a message that has each that listens drain and exit without closing its store (those
     * already draining too; one still starting, which may not hear it yet, gets SIGTERM); resolves
     * with the highest code asked for once all have exited.
     */
    const stopAll = (code: number, storeStoppedIn?: Worker) => {
      exitCode = Math.max(exitCode, code);
      const leavingStores = storeStoppedIn !== undefined;
      const workers = running().filter((worker) => worker !== storeStoppedIn);
      for (const worker of workers) {
        if (leavingStores && listenedAt.has(worker.id)) {
          worker.send(STOP_LEAVING_STORE, undefined, (error) => {
            if (error !== null) worker.process.kill('SIGTERM');
          });
        } else if (!stopping || leavingStores) {
          worker.process.kill('SIGTERM');
        }
      }
      if (stopping) return;
      stopping = true;
      const all = running();
      let left = all.length;
      if (left === 0) resolve(exitCode);
      for (const worker of all) {
        worker.once('exit', () => {
          if (--left === 0) resolve(exitCode);
        });
      }
    };
    cluster.on('listening', (worker, address) => {
      listenedAt.set(worker.id, Date.now());
      // Not once stopping: a worker that listened just before the stop signal would otherwise
      // have the development token created, and never shown, while the service stops.
      if (announced || stopping) return;
      announced = true;
      hooks.onFirstListening(address.port).catch(() => stopAll(1));
    });
    cluster.on('exit', (worker, code, signal) => {
      if (stopping) return;
      const exited = { worker: worker.process.pid, code, signal };
      const listenedSince = listenedAt.get(worker.id);
      listenedAt.delete(worker.id);
      const servedMs = listenedSince === undefined ? undefined : Date.now() - listenedSince;
      if (servedMs !== undefined && servedMs >= SERVED_WELL_MS) {
        failures = 0;
        logger.error(exited, 'worker exited; starting another');
        fork();
      } else if (servedMs !== undefined) {
        logger.error(
          { ...exited, servedMs, retryInMs: forkLater() },
          'a worker exited soon after it listened (see its output); starting another later',
        );
      } else if (!announced) {
        logger.fatal(exited, 'a worker exited before it listened (see its output): stopping');
        stopAll(1);
      } else {
        logger.error(
          { ...exited, retryInMs: forkLater() },
          'a new worker exited before it listened (see its output); starting another later',
        );
      }
    });
    cluster.on('message', (worker, message) => {
      if (message !== STORE_STOPPED) return;
      logger.fatal(
        { worker: worker.process.pid },
        "a worker's store can no longer write safely: stopping every worker",
      );
      stopAll(1, worker);
    });
    hooks.onStopSignal((signal) => {
      logger.info({ signal }, 'stopping workers');
      stopAll(0);
    });
    // Forked only now: a stop signal while they start stops those already forked, and no more.
    for (let i = 0; i < workers; i++) fork();
  });
}
