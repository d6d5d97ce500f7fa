import type { TokenChangeWatch } from '../store/plant-store';

/**
 * Tokens found active, by the hash of their secret, kept until the store's token change watch
 * moves: then every entry goes at once. Only active tokens are kept, so made-up secrets cannot
 * fill it; past `capacity` entries the oldest goes.
 */
export class VerifiedTokens<T> {
  private readonly entries = new Map<string, T>();
  private version: number;

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

  get(hash: string): T | undefined {
    this.current();
    return this.entries.get(hash);
  }

  /** Keeps what a look-up begun at version `readAt` (from current()) found, unless a token changed since. */
  set(hash: string, entry: T, readAt: number): void {
    if (this.current() !== readAt) return;
    this.entries.delete(hash);
    if (this.entries.size >= this.capacity) {
      this.entries.delete(this.entries.keys().next().value as string);
    }
    this.entries.set(hash, entry);
  }
}
