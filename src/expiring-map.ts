/** Keys an ExpiringMap holds before its first sweep of ended entries. */
const FIRST_SWEEP_AT_KEYS = 10_000;

/** Keys an ExpiringMap holds at most (about 12 MB of small entries). */
const CAPACITY_KEYS = 100_000;

/**
 * A map of entries that each end at a time (`endsAt`), for what is kept per client or per token.
 * The ended entries are swept out when a new key would make the map twice the size it had after its
 * last sweep (at least `firstSweepAt`, at most `capacity`). A sweep that leaves it within a tenth of
 * `capacity` also drops the keys set first, live or not, down to nine tenths of it: so no number of
 * clients can grow it past `capacity`, and a sweep, which reads every entry, comes only after at
 * least half the map's size, or a tenth of its capacity, in new keys (at most about ten reads an
 * insertion on average, however many keys are live). Whoever makes that many new keys within an
 * entry's life (that many client addresses, say) gains nothing from the eviction that the keys
 * themselves did not already give.
 */
export class ExpiringMap<V> {
  private readonly entries = new Map<string, V>();
  private sweepAt: number;

  constructor(
    private readonly endsAt: (value: V) => number,
    private readonly firstSweepAt = FIRST_SWEEP_AT_KEYS,
    private readonly capacity = CAPACITY_KEYS,
  ) {
    this.sweepAt = Math.min(firstSweepAt, capacity);
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

  /** Sets `key`'s entry; a new key may first sweep out the entries ended at `now` (see above). */
  set(key: string, value: V, now: number): void {
    if (!this.entries.has(key) && this.entries.size >= this.sweepAt) {
      for (const [ended, entry] of this.entries) {
        if (this.endsAt(entry) <= now) this.entries.delete(ended);
      }
      // Room for a tenth of the capacity before the next sweep, which reads every entry.
      const roomy = this.capacity - Math.ceil(this.capacity / 10);
      if (this.entries.size > roomy) this.evictOldest(this.entries.size - roomy);
      this.sweepAt = Math.min(this.capacity, Math.max(this.firstSweepAt, 2 * this.entries.size));
    }
    this.entries.set(key, value);
  }

  /**
   * Drops the `count` keys set first, in one walk: V8 keeps a deleted entry's slot until it
   * rebuilds the table, so dropping one key at a time from the front would walk past every earlier
   * deletion each time (a new key at a capacity of 100,000 cost 22 µs, then 155 µs).
   */
  private evictOldest(count: number): void {
    let left = count;
    for (const key of this.entries.keys()) {
      this.entries.delete(key);
      if (--left === 0) return;
    }
  }
}
