import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { VerifiedTokens } from '../../src/service/verified-tokens';
import type { PlantStore, TokenChangeWatch } from '../../src/store/plant-store';
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
