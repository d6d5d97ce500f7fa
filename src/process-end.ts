import type { PlantStore } from './store/plant-store';

/**
 * Ends the process with `code`; or with SIGKILL, as a crash would, when `store` still has a call
 * into the disk running off the event loop: Node's exit joins libuv's threads and the store's
 * checkpoint thread, so a sync stuck on a disk that stopped answering (a store stopped on an
 * overdue sync, or left open when another worker's stopped) would hold the process for as long as
 * the disk does. The store's next start recovers from what it left, as after a crash. A store
 * closed normally has waited for every such call, and ends with `code`.
 */
export function endProcess(code: number, store: PlantStore | undefined): never {
  if (store?.offLoopDiskCalls?.pending() === true) process.kill(process.pid, 'SIGKILL');
  return process.exit(code);
}
