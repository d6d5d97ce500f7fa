import Database from 'better-sqlite3';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { VerifiedTokens } from '../../src/service/verified-tokens';
import {
  StoreUnavailableError,
  type PlantStore,
  type TokenChangeWatch,
} from '../../src/store/plant-store';
import { openSqlitePlantStore } from '../../src/store/sqlite/sqlite-plant-store';

describe('VerifiedTokens over a SQLite store', () => {
  let dir: string;
  let store: PlantStore;
  let watch: TokenChangeWatch;

  function insertToken(id: string): Promise<void> {
    return store.insertToken({
      id,
      name: id,
      hash: id.repeat(64 / id.length),
      createdAt: new Date(),
    });
  }

  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'verified-tokens-'));
    store = openSqlitePlantStore({
      path: path.join(dir, 'plants.sqlite'),
      synchronous: 'FULL',
      busyTimeoutMs: 1000,
    });
    if (store.tokenChanges === undefined) throw new Error('the SQLite store has a token watch');
    watch = store.tokenChanges;
  });

  afterEach(async () => {
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('returns what was kept while no token changes', () => {
    const verified = new VerifiedTokens<string>(watch, 10);

    verified.set('a', 'first', verified.current());

    expect(verified.get('a')).toBe('first');
    expect(verified.get('b')).toBeUndefined();
  });

  it('drops every entry once a token changes', async () => {
    const verified = new VerifiedTokens<string>(watch, 10);
    verified.set('a', 'first', verified.current());
    verified.set('b', 'second', verified.current());

    await insertToken('aa');
    verified.current();

    expect(verified.get('a')).toBeUndefined();
    expect(verified.get('b')).toBeUndefined();
  });

  it('does not keep what a look-up found when a token changed since it began', async () => {
    const verified = new VerifiedTokens<string>(watch, 10);
    const readAt = verified.current();

    await insertToken('aa');
    verified.set('a', 'stale', readAt);

    expect(verified.get('a')).toBeUndefined();
  });

  describe('afterReads', () => {
    /** A revocation by another connection to the file, as the token CLI makes it. */
    function revokeFromAnotherConnection(id: string): void {
      const other = new Database(path.join(dir, 'plants.sqlite'));
      try {
        other.prepare('UPDATE tokens SET revoked_at = 1 WHERE id = ?').run(id);
      } finally {
        other.close();
      }
    }

    it('reads the watch once for the turn, after the calls made in it, and so sees a change made between them', async () => {
      await insertToken('aa');
      const verified = new VerifiedTokens<string>(watch, 10);
      verified.set('a', 'first', verified.current());

      const first = verified.afterReads();
      revokeFromAnotherConnection('aa');
      const second = verified.afterReads();

      const version = await first;
      expect(await second).toBe(version);
      expect(verified.get('a')).toBeUndefined();
      expect(verified.current()).toBe(version);
    });

    it('reads the watch again in a later turn', async () => {
      await insertToken('aa');
      const verified = new VerifiedTokens<string>(watch, 10);
      const before = await verified.afterReads();
      verified.set('a', 'first', before);
      expect(await verified.afterReads()).toBe(before);
      expect(verified.get('a')).toBe('first');

      revokeFromAnotherConnection('aa');

      expect(await verified.afterReads()).not.toBe(before);
      expect(verified.get('a')).toBeUndefined();
    });

    /** The store's watch, counting its reads. */
    function counted(): { readonly watch: TokenChangeWatch; reads(): number } {
      let reads = 0;
      return {
        watch: {
          version: () => {
            reads++;
            return watch.version();
          },
        },
        reads: () => reads,
      };
    }

    it('rejects every call of the turn with what the watch throws, and reads the watch again in the next turn', async () => {
      const reading = counted();
      const verified = new VerifiedTokens<string>(reading.watch, 10);
      const closing = store.close();

      const calls = [verified.afterReads(), verified.afterReads()];
      for (const call of calls) await expect(call).rejects.toThrow(StoreUnavailableError);
      expect(reading.reads()).toBe(2);
      await closing;

      await expect(verified.afterReads()).rejects.toThrow(StoreUnavailableError);
      expect(reading.reads()).toBe(3);
    });

    it('reads the watch once for all the calls of a turn', async () => {
      const reading = counted();
      const verified = new VerifiedTokens<string>(reading.watch, 10);
      const reads = reading.reads();

      const versions = await Promise.all(Array.from({ length: 20 }, () => verified.afterReads()));

      expect(new Set(versions).size).toBe(1);
      expect(reading.reads()).toBe(reads + 1);
    });
  });

  it('keeps at most its capacity, dropping the oldest entry first', () => {
    const verified = new VerifiedTokens<string>(watch, 2);
    const readAt = verified.current();

    verified.set('a', 'first', readAt);
    verified.set('b', 'second', readAt);
    verified.set('a', 'first again', readAt);
    verified.set('c', 'third', readAt);

    expect(verified.get('b')).toBeUndefined();
    expect(verified.get('a')).toBe('first again');
    expect(verified.get('c')).toBe('third');
  });
});
