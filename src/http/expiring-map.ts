/** Keys an ExpiringMap holds before its first sweep of ended entries. */
const FIRST_SWEEP_AT_KEYS = 10_000;

/** Keys an ExpiringMap holds at most (about 12 MB of small entries). */
const CAPACITY_KEYS = 100_000;

/**
 * A map of entries that each end at a time (`endsAt`), for what a limiter keeps per client. The
 * ended entries are swept out when a new key would make the map twice the size it had after its
 * last sweep (and at least `firstSweepAt`): each sweep reads every entry, so sweeping only after the
 * map has doubled costs an insertion O(1) on average however many keys are live at once, while the
 * map holds at most twice the entries live at its last sweep (or `firstSweepAt`). Past `capacity`
 * keys the one set first goes, so no number of clients can grow it further: whoever makes that many
 * new keys within an entry's life (that many client addresses, say) gets no more from the eviction
 * than the keys themselves already give.
 */
export class ExpiringMap<V> {
  private readonly entries = new Map<string, V>();
  private sweepAt: number;

  constructor(
    private readonly endsAt: (value: V) => number,
    private readonly firstSweepAt = FIRST_SWEEP_AT_KEYS,
    private readonly capacity = CAPACITY_KEYS,
  ) {
    this.sweepAt = firstSweepAt;
  }

  get size(): number {
    return this.entries.size;
  }

  get(key: string): V | undefined {
    return this.entries.get(key);
  }

  delete(key: string): void {
    this.entries.delete(key);
  }

  /**
   * Sets `key`'s entry; a new key may first sweep out the entries ended at `now`, and at capacity
   * drops the key set first.
   */
  set(key: string, value: V, now: number): void {
    if (!this.entries.has(key)) {
      if (this.entries.size >= this.sweepAt) {
        for (const [ended, entry] of this.entries) {
          if (this.endsAt(entry) <= now) this.entries.delete(ended);
        }
        this.sweepAt = Math.max(this.firstSweepAt, 2 * this.entries.size);
      }
      if (this.entries.size >= this.capacity) {
        this.entries.delete(this.entries.keys().next().value as string);
      }
    }
    this.entries.set(key, value);
  }
}
