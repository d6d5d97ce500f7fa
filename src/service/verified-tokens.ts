import { createBatcher } from '../store/batcher';
import type { TokenChangeWatch } from '../store/plant-store';

/**
 * Tokens found active, by the hash of their secret, kept until the store's token change watch
 * moves: then every entry goes at once. Only active tokens are kept, so made-up secrets cannot
 * fill it; past `capacity` entries the oldest goes.
 */
export class VerifiedTokens<T> {
  private readonly entries = new Map<string, T>();
  private version: number;
  /** One read of the watch for the afterReads() calls of a turn (see createBatcher). */
  private readonly turnReads = createBatcher<void, number>(
    async (calls) => {
      const version = this.current();
      return calls.map(() => version);
    },
    { maxInFlight: 1, maxBatch: Infinity, early: true },
  );

  constructor(
    private readonly watch: TokenChangeWatch,
    private readonly capacity: number,
  ) {
    this.version = watch.version();
  }

  /** The watch's version now; every entry is dropped first if it moved. */
  current(): number {
    const version = this.watch.version();
    if (version !== this.version) {
      this.entries.clear();
      this.version = version;
    }
    return version;
  }

  /**
   * current(), read once for every caller in this turn of the event loop: batched as the store's
   * statements are (createBatcher), so the read runs in a setImmediate, after every call made before
   * it, and each caller sees every token change committed before its call (a request's comes after
   * its headers were read). The requests of a turn share the read, since the poll phase reads every
   * connection that was ready before the check phase runs setImmediate's callbacks: one read of the
   * watch a turn instead of one a request (a look-up that finds nothing kept reads it again, in
   * set()). The read runs before the group commit due in the same check phase is sent (the
   * batcher's `early`), so the writes of the requests it lets through join that commit. Rejects,
   * for every caller of the turn, with what the watch throws; the next turn reads it again.
   */
  afterReads(): Promise<number> {
    return this.turnReads.submit();
  }

  /** What is kept for `hash`, as of the watch's latest reading (current() or afterReads()). */
  get(hash: string): T | undefined {
    return this.entries.get(hash);
  }

  /**
   * Keeps what a look-up begun at version `readAt` (from current() or afterReads()) found, unless a
   * token changed since.
   */
  set(hash: string, entry: T, readAt: number): void {
    if (this.current() !== readAt) return;
    this.entries.delete(hash);
    if (this.entries.size >= this.capacity) {
      this.entries.delete(this.entries.keys().next().value as string);
    }
    this.entries.set(hash, entry);
  }
}
