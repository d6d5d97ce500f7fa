import { ExpiringMap } from '../src/expiring-map';

/** A map of entries that are their own end times, counting how many times it read an entry's end. */
function counted(
  firstSweepAt: number,
  capacity?: number,
): { map: ExpiringMap<number>; reads: () => number } {
  let reads = 0;
  const map = new ExpiringMap<number>(
    (endsAt) => {
      reads++;
      return endsAt;
    },
    firstSweepAt,
    capacity,
  );
  return { map, reads: () => reads };
}

describe('ExpiringMap', () => {
  it('keeps every entry until it holds firstSweepAt keys, then sweeps out the ended ones', () => {
    const { map } = counted(4);
    map.set('a', 10, 0);
    map.set('b', 20, 0);
    map.set('c', 30, 0);
    map.set('d', 40, 0);
    expect(map.size).toBe(4);

    map.set('e', 50, 25);

    expect(map.size).toBe(3);
    expect([map.get('a'), map.get('b'), map.get('c'), map.get('d')]).toStrictEqual([
      undefined,
      undefined,
      30,
      40,
    ]);
    expect(map.get('e')).toBe(50);
  });

  it('never sweeps for a key it already holds', () => {
    const { map, reads } = counted(2);
    map.set('a', 10, 0);
    map.set('b', 20, 0);

    map.set('a', 30, 25);

    expect(reads()).toBe(0);
    expect(map.get('b')).toBe(20);
  });

  it('reads each entry O(1) times on average while every key stays live', () => {
    const { map, reads } = counted(1_000);
    const keys = 50_000;

    for (let i = 0; i < keys; i++) map.set(`client-${i}`, Number.MAX_SAFE_INTEGER, i);

    expect(map.size).toBe(keys);
    // Sweeps at 1,000, 2,000, 4,000, ... keys: fewer reads in all than twice the keys.
    expect(reads()).toBeLessThan(2 * keys);
  });

  it('holds at most twice the entries live at its last sweep while keys come and go', () => {
    const { map } = counted(100);
    const lifetime = 1_000;
    let largest = 0;

    // A new key every tick, each live for `lifetime` ticks: 1,000 live at any time.
    for (let now = 0; now < 20_000; now++) {
      map.set(`client-${now}`, now + lifetime, now);
      largest = Math.max(largest, map.size);
    }

    expect(largest).toBeLessThanOrEqual(2 * lifetime + 1);
    expect(map.get('client-0')).toBeUndefined();
    expect(map.get('client-19999')).toBe(20_999);
  });

  it('at its capacity drops the tenth of it set first, live or not', () => {
    const { map } = counted(4, 20);

    for (let i = 0; i < 21; i++) map.set(`client-${i}`, Number.MAX_SAFE_INTEGER, i);

    expect(map.size).toBe(19);
    expect([map.get('client-0'), map.get('client-1')]).toStrictEqual([undefined, undefined]);
    expect(map.get('client-2')).toBe(Number.MAX_SAFE_INTEGER);
    expect(map.get('client-20')).toBe(Number.MAX_SAFE_INTEGER);
  });

  it('at its capacity sweeps out the ended entries before it drops live ones', () => {
    const { map } = counted(4, 10);
    for (let i = 0; i < 5; i++) map.set(`ended-${i}`, 1, 0);
    for (let i = 0; i < 5; i++) map.set(`live-${i}`, 100, 0);

    map.set('new', 100, 2);

    expect(map.size).toBe(6);
    expect(map.get('ended-0')).toBeUndefined();
    expect(map.get('live-0')).toBe(100);
  });

  it('reads at most about ten entries an insertion at its capacity with every key live', () => {
    const { map, reads } = counted(100, 1_000);
    const keys = 50_000;

    for (let i = 0; i < keys; i++) map.set(`client-${i}`, Number.MAX_SAFE_INTEGER, i);

    expect(map.size).toBeLessThanOrEqual(1_000);
    // A sweep of 1,000 entries, then a tenth dropped, every 100 insertions.
    expect(reads()).toBeLessThan(11 * keys);
  });

  it('reads at most about ten entries an insertion with the live keys just under its capacity', () => {
    const { map, reads } = counted(100, 1_000);
    const keys = 50_000;

    // A new key every tick, each live for 990 ticks: 990 live at once, ten short of the capacity.
    for (let now = 0; now < keys; now++) map.set(`client-${now}`, now + 990, now);

    expect(map.size).toBeLessThanOrEqual(1_000);
    expect(reads()).toBeLessThan(11 * keys);
  });
});
