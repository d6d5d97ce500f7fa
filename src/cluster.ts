import cluster from 'node:cluster';
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

/** A replacement worker that fails at start is started again after this, doubled each time up to a limit. */
const RESTART_DELAY_MS = { first: 500, max: 30_000 };

/**
 * Runs `workers` processes that share the port and stops them all on a stop signal (exit code 0).
 * A worker that dies after it listened is replaced at once. One that dies before it listened
 * failed at start: before the service ever listened (the port taken, say), every replacement would
 * fail the same way, so all stop with exit code 1; once the service serves, the failure is the
 * moment's (the database unreachable), so the others go on and the replacement is started again
 * after a delay that doubles with each failure in a row.
 */
export function supervise(
  workers: number,
  logger: Logger,
  hooks: SupervisorHooks,
): Promise<number> {
  let stopping = false;
  let announced = false;
  let failedStarts = 0;
  const listened = new Set<number>();
  const fork = () => {
    if (!stopping) cluster.fork();
  };
  return new Promise<number>((resolve) => {
    const stopAll = (code: number) => {
      stopping = true;
      const workers = Object.values(cluster.workers ?? {}).filter((worker) => worker !== undefined);
      let running = workers.length;
      if (running === 0) resolve(code);
      for (const worker of workers) {
        worker.once('exit', () => {
          if (--running === 0) resolve(code);
        });
        worker.process.kill('SIGTERM');
      }
    };
    cluster.on('listening', (worker, address) => {
      listened.add(worker.id);
      failedStarts = 0;
      // Not once stopping: a worker that listened just before the stop signal would otherwise
      // have the development token created, and never shown, while the service stops.
      if (announced || stopping) return;
      announced = true;
      hooks.onFirstListening(address.port).catch(() => stopAll(1));
    });
    cluster.on('exit', (worker, code, signal) => {
      if (stopping) return;
      const exited = { worker: worker.process.pid, code, signal };
      if (listened.delete(worker.id)) {
        logger.error(exited, 'worker exited; starting another');
        fork();
      } else if (!announced) {
        logger.fatal(exited, 'a worker exited before it listened (see its output): stopping');
        stopAll(1);
      } else {
        const retryInMs = Math.min(
          RESTART_DELAY_MS.max,
          RESTART_DELAY_MS.first * 2 ** failedStarts++,
        );
        logger.error(
          { ...exited, retryInMs },
          'a new worker exited before it listened (see its output); starting another later',
        );
        setTimeout(fork, retryInMs);
      }
    });
    hooks.onStopSignal((signal) => {
      logger.info({ signal }, 'stopping workers');
      stopAll(0);
    });
    // Forked only now: a stop signal while they start stops those already forked, and no more.
    for (let i = 0; i < workers; i++) fork();
  });
}
