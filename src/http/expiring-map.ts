/** Keys an ExpiringMap holds before its first sweep of ended entries. */
const FIRST_SWEEP_AT_KEYS = 10_000;

/** Keys an ExpiringMap holds at most (about 12 MB of small entries). */
const CAPACITY_KEYS = 100_000;

/**
 * A map of entries that each end at a time (`endsAt`), for what a limiter keeps per client. The
 * ended entries are swept out when a new key would make the map twice the size it had after its
 * last sweep (at least `firstSweepAt`, at most `capacity`): each sweep reads every entry, so
 * sweeping only after the map has doubled costs an insertion O(1) on average however many keys are
 * live at once. If a sweep leaves it at `capacity`, the tenth of it set first goes, live or not, so
 * no number of clients can grow it further (and, a tenth at a time, the next sweep comes a tenth of
 * the capacity later: at most about ten reads an insertion). Whoever makes that many new keys
 * within an entry's life (that many client addresses, say) gains nothing from the eviction that the
 * keys themselves did not already give.
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
   * drops the keys set first.
   */
  set(key: string, value: V, now: number): void {
    if (!this.entries.has(key)) {
      if (this.entries.size >= this.sweepAt) {
        for (const [ended, entry] of this.entries) {
          if (this.endsAt(entry) <= now) this.entries.delete(ended);
        }
        this.sweepAt = Math.min(this.capacity, Math.max(this.firstSweepAt, 2 * this.entries.size));
      }
      if (this.entries.size >= this.capacity) this.evictOldest();
    }
    this.entries.set(key, value);
  }

  /**
   * Drops the tenth of the capacity set first, in one walk: V8 keeps a deleted entry's slot until
   * it rebuilds the table, so dropping one key at a time from the front would walk past every
   * earlier deletion each time (a new key at a capacity of 100,000 cost 22 µs, then 155 µs).
   */
  private evictOldest(): void {
    let left = Math.ceil(this.capacity / 10);
    for (const key of this.entries.keys()) {
      this.entries.delete(key);
      if (--left === 0) return;
    }
  }
}
