import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import {
  createTokensService,
  LAST_USED_GRANULARITY_MS,
  TokenInDoubtError,
  type TokensService,
} from '../../src/service/tokens-service';
import { StoreUnavailableError, type PlantStore } from '../../src/store/plant-store';
import { openSqlitePlantStore } from '../../src/store/sqlite/sqlite-plant-store';
import { wrapStoreMethods } from '../../src/store/wrap-store';

const START = Date.parse('2024-03-01T10:20:30.123Z');
const SECRET = /^plnt_[A-Za-z0-9_-]{43}$/;

function sha256Hex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

describe('createTokensService', () => {
  let dir: string;
  let file: string;
  let store: PlantStore;
  let tokens: TokensService;
  let nowMs: number;
  const readers: Database.Database[] = [];

  function advance(ms: number): void {
    nowMs += ms;
  }

  /** Every row of the tokens table, read through a second connection as another process would. */
  function rawTokenRows(): Record<string, unknown>[] {
    const reader = new Database(file, { readonly: true, fileMustExist: true });
    readers.push(reader);
    return reader.prepare('SELECT * FROM tokens').all() as Record<string, unknown>[];
  }

  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tokens-service-'));
    file = path.join(dir, 'plants.sqlite');
    store = openSqlitePlantStore({ path: file, synchronous: 'FULL', busyTimeoutMs: 1000 });
    nowMs = START;
    tokens = createTokensService({ store, now: () => new Date(nowMs) });
  });

  afterEach(async () => {
    for (const reader of readers.splice(0)) reader.close();
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  describe('issue', () => {
    it('returns the id, name, creation time and a plnt_ secret of 256 random bits', async () => {
      const issued = await tokens.issue('laptop');

      expect(issued).toStrictEqual({
        id: expect.any(String),
        name: 'laptop',
        createdAt: new Date(START),
        secret: expect.stringMatching(SECRET),
      });
      expect(Buffer.from(issued.secret.slice('plnt_'.length), 'base64url')).toHaveLength(32);
    });

    it('returns a different secret and id each time', async () => {
      const issued = await Promise.all(Array.from({ length: 20 }, () => tokens.issue('laptop')));

      expect(new Set(issued.map((token) => token.secret)).size).toBe(20);
      expect(new Set(issued.map((token) => token.id)).size).toBe(20);
    });

    it('stores only the SHA-256 hex of the secret, never the secret itself', async () => {
      const { id, secret } = await tokens.issue('laptop');

      const rows = rawTokenRows();

      expect(rows).toStrictEqual([
        {
          id,
          name: 'laptop',
          hash: sha256Hex(secret),
          created_at: START,
          last_used_at: null,
          revoked_at: null,
        },
      ]);
      const random = secret.slice('plnt_'.length);
      for (const value of Object.values(rows[0] ?? {})) {
        expect(String(value)).not.toContain(random);
      }
    });

    it('writes the secret to no byte of the database file or its WAL', async () => {
      const { secret } = await tokens.issue('laptop-7f3a');
      await tokens.verify(secret);

      const files = fs.readdirSync(dir).map((name) => fs.readFileSync(path.join(dir, name)));

      expect(files.some((bytes) => bytes.includes('laptop-7f3a'))).toBe(true);
      expect(files.some((bytes) => bytes.includes(sha256Hex(secret)))).toBe(true);
      expect(files.filter((bytes) => bytes.includes(secret.slice('plnt_'.length)))).toEqual([]);
    });

    it('trims the name before storing it', async () => {
      const issued = await tokens.issue(' \t laptop \n');

      expect(issued.name).toBe('laptop');
      expect((await tokens.list()).map((token) => token.name)).toStrictEqual(['laptop']);
    });

    it("throws a TokenInDoubtError naming the token, with the store's error as its cause, when the store fails to keep it", async () => {
      const other = openSqlitePlantStore({
        path: path.join(dir, 'closed.sqlite'),
        synchronous: 'FULL',
        busyTimeoutMs: 1000,
      });
      const service = createTokensService({ store: other });
      await other.close();
      const issuing = service.issue('laptop');

      const error: unknown = await issuing.then(
        () => undefined,
        (reason: unknown) => reason,
      );
      expect(error).toBeInstanceOf(TokenInDoubtError);
      const { tokenId, cause, message } = error as TokenInDoubtError;
      expect(tokenId).toMatch(/^[0-9a-f]{12}$/);
      expect(message).toBe(`Token ${tokenId} may have been stored before the store failed.`);
      expect(cause).toBeInstanceOf(StoreUnavailableError);
    });

    const LENGTH = 'A token name must have 1 to 100 characters.';
    const CONTROL = 'A token name must not hold control characters.';
    it.each([
      ['empty', '', LENGTH],
      ['whitespace-only', ' \t\n ', LENGTH],
      ['101 characters', 'a'.repeat(101), LENGTH],
      ['101 emoji', '🌱'.repeat(101), LENGTH],
      ['holding an escape sequence', 'ci\u001b[2Jlaptop', CONTROL],
      ['holding a line break inside', 'ci\nlaptop', CONTROL],
      ['holding a tab inside', 'ci\tlaptop', CONTROL],
      ['holding DEL', 'ci\u007f', CONTROL],
      ['holding a C1 control', 'ci\u009blaptop', CONTROL],
      ['holding a line separator', 'ci\u2028laptop', CONTROL],
      ['holding a paragraph separator', 'ci\u2029laptop', CONTROL],
      ['holding a right-to-left override', 'ci\u202elaptop', CONTROL],
      ['holding a bidirectional isolate', 'ci\u2066laptop\u2069', CONTROL],
    ])('throws a RangeError and stores nothing when the name is %s', async (_, name, message) => {
      await expect(tokens.issue(name)).rejects.toStrictEqual(new RangeError(message));
      expect(await tokens.list()).toStrictEqual([]);
    });

    it.each([
      ['an emoji joined by a zero-width joiner', '\u{1F9D1}\u200D\u{1F33E} greenhouse'],
      ['letters of another script', 'Gewächshaus 温室'],
    ])('accepts a name with %s', async (_, name) => {
      expect((await tokens.issue(name)).name).toBe(name);
    });

    it.each([
      ['100 characters', 'a'.repeat(100)],
      ['100 emoji (200 UTF-16 code units)', '🌱'.repeat(100)],
      ['100 characters inside surrounding spaces', `  ${'b'.repeat(100)}  `],
    ])('accepts and stores a name of %s', async (_, name) => {
      const issued = await tokens.issue(name);

      expect(issued.name).toBe(name.trim());
      expect((await tokens.list()).map((token) => token.name)).toStrictEqual([name.trim()]);
    });
  });

  describe('verify', () => {
    it('returns the principal of the token the secret belongs to', async () => {
      await tokens.issue('laptop');
      const { id, secret } = await tokens.issue('phone');

      expect(await tokens.verify(secret)).toStrictEqual({ tokenId: id, tokenName: 'phone' });
    });

    it('returns undefined for an unknown secret with the right shape', async () => {
      await tokens.issue('laptop');

      expect(await tokens.verify(`plnt_${'A'.repeat(43)}`)).toBeUndefined();
    });

    it('returns undefined for a real secret without its plnt_ prefix', async () => {
      const { secret } = await tokens.issue('laptop');

      expect(await tokens.verify(secret.slice('plnt_'.length))).toBeUndefined();
    });

    it('returns undefined for an empty string', async () => {
      await tokens.issue('laptop');

      expect(await tokens.verify('')).toBeUndefined();
    });

    it('returns undefined on the very next call after the token is revoked', async () => {
      const { id, secret } = await tokens.issue('laptop');
      expect(await tokens.verify(secret)).toStrictEqual({ tokenId: id, tokenName: 'laptop' });

      expect(await tokens.revoke(id)).toBe(true);

      expect(await tokens.verify(secret)).toBeUndefined();
    });

    describe('the tokens it found active, kept in memory', () => {
      let lookups: number;

      /** The same store, counting the token look-ups that reach it. */
      function counting(inner: PlantStore): PlantStore {
        return wrapStoreMethods(inner, (name, method) => (...args) => {
          if (name === 'findActiveToken') lookups++;
          return method(...args);
        });
      }

      beforeEach(() => {
        lookups = 0;
      });

      it('answers a token again without reading the store, until a token changes', async () => {
        const counted = createTokensService({ store: counting(store), now: () => new Date(nowMs) });
        const { id, secret } = await counted.issue('laptop');
        const principal = { tokenId: id, tokenName: 'laptop' };

        expect(await counted.verify(secret)).toStrictEqual(principal);
        expect(await counted.verify(secret)).toStrictEqual(principal);
        expect(await counted.verify(secret)).toStrictEqual(principal);
        expect(lookups).toBe(1);

        await counted.issue('phone');
        expect(await counted.verify(secret)).toStrictEqual(principal);
        expect(lookups).toBe(2);
      });

      it('records the use of a token once for the calls that find it due together', async () => {
        let touches = 0;
        const { tokenChanges, ...unwatched } = store;
        expect(tokenChanges).toBeDefined();
        for (const [kind, inner] of [
          ['watched', store],
          ['unwatched', unwatched],
        ] as const) {
          touches = 0;
          const counted = createTokensService({
            store: wrapStoreMethods(inner, (name, method) => (...args) => {
              if (name === 'touchToken') touches++;
              return method(...args);
            }),
            now: () => new Date(nowMs),
          });
          const { id, secret } = await counted.issue(kind);

          const principals = await Promise.all(
            Array.from({ length: 20 }, () => counted.verify(secret)),
          );
          expect(principals.every((principal) => principal?.tokenId === id)).toBe(true);
          expect(touches).toBe(1);

          advance(LAST_USED_GRANULARITY_MS);
          await Promise.all(Array.from({ length: 20 }, () => counted.verify(secret)));
          expect(touches).toBe(2);
        }
      });

      it('reads the store on every call when the store has no token watch', async () => {
        const { tokenChanges, ...unwatched } = store;
        expect(tokenChanges).toBeDefined();
        const counted = createTokensService({
          store: counting(unwatched),
          now: () => new Date(nowMs),
        });
        const { secret } = await counted.issue('laptop');

        await counted.verify(secret);
        await counted.verify(secret);

        expect(lookups).toBe(2);
      });

      it('does not keep unknown secrets: each one is looked up', async () => {
        const counted = createTokensService({ store: counting(store), now: () => new Date(nowMs) });
        await counted.issue('laptop');
        const unknown = `plnt_${'A'.repeat(43)}`;

        expect(await counted.verify(unknown)).toBeUndefined();
        expect(await counted.verify(unknown)).toBeUndefined();
        expect(lookups).toBe(2);
      });

      it('returns undefined on the very next call after another connection revokes the token', async () => {
        const { id, secret } = await tokens.issue('laptop');
        expect(await tokens.verify(secret)).toStrictEqual({ tokenId: id, tokenName: 'laptop' });
        const other = new Database(file);
        readers.push(other);

        other.prepare('UPDATE tokens SET revoked_at = ? WHERE id = ?').run(nowMs, id);

        expect(await tokens.verify(secret)).toBeUndefined();
      });

      it('returns undefined for a call begun before another connection revokes the token in the same turn', async () => {
        const { id, secret } = await tokens.issue('laptop');
        expect(await tokens.verify(secret)).toStrictEqual({ tokenId: id, tokenName: 'laptop' });
        const other = new Database(file);
        readers.push(other);

        const verifying = tokens.verify(secret);
        other.prepare('UPDATE tokens SET revoked_at = ? WHERE id = ?').run(nowMs, id);

        expect(await verifying).toBeUndefined();
      });

      it('lets the write of a call it answers join the group commit of the same turn', async () => {
        const { secret } = await tokens.issue('laptop');
        await tokens.verify(secret);
        const totals = store.commitTotals;
        if (totals === undefined) throw new Error('the SQLite store reports its commit totals');
        const before = { commits: totals.commits, writes: totals.writes };

        // The commit is scheduled before the check; the check's read comes first all the same.
        const first = store.createPlant({ id: 1n, name: 'first' });
        const second = tokens
          .verify(secret)
          .then(() => store.createPlant({ id: 2n, name: 'second' }));
        await Promise.all([first, second]);

        expect(totals.commits - before.commits).toBe(1);
        expect(totals.writes - before.writes).toBe(2);
      });

      it('returns undefined on the very next call after another store on the file revokes it', async () => {
        const { id, secret } = await tokens.issue('laptop');
        expect(await tokens.verify(secret)).toStrictEqual({ tokenId: id, tokenName: 'laptop' });
        const second = openSqlitePlantStore({
          path: file,
          synchronous: 'FULL',
          busyTimeoutMs: 1000,
        });

        expect(await createTokensService({ store: second }).revoke(id)).toBe(true);
        await second.close();

        expect(await tokens.verify(secret)).toBeUndefined();
      });
    });

    it('sets lastUsedAt on first use, then updates it at most once per LAST_USED_GRANULARITY_MS', async () => {
      const { secret } = await tokens.issue('laptop');
      const lastUsedAt = async (): Promise<Date | undefined> =>
        (await tokens.list())[0]?.lastUsedAt;
      expect(await tokens.list()).toStrictEqual([
        { id: expect.any(String), name: 'laptop', createdAt: new Date(START) },
      ]);

      advance(1_000);
      await tokens.verify(secret);
      const firstUse = START + 1_000;
      expect(await lastUsedAt()).toStrictEqual(new Date(firstUse));

      advance(LAST_USED_GRANULARITY_MS - 1);
      await tokens.verify(secret);
      expect(await lastUsedAt()).toStrictEqual(new Date(firstUse));

      advance(1);
      await tokens.verify(secret);
      expect(await lastUsedAt()).toStrictEqual(new Date(firstUse + LAST_USED_GRANULARITY_MS));
    });

    it('does not set lastUsedAt when the secret is unknown', async () => {
      await tokens.issue('laptop');

      await tokens.verify(`plnt_${'A'.repeat(43)}`);

      expect((await tokens.list())[0]).not.toHaveProperty('lastUsedAt');
    });
  });

  describe('revoke', () => {
    it('returns true once, then false for the same id, with revokedAt at the clock time', async () => {
      const { id } = await tokens.issue('laptop');
      advance(5_000);

      expect(await tokens.revoke(id)).toBe(true);
      advance(5_000);
      expect(await tokens.revoke(id)).toBe(false);

      expect((await tokens.list())[0]?.revokedAt).toStrictEqual(new Date(START + 5_000));
    });

    it('returns false for an unknown id', async () => {
      await tokens.issue('laptop');

      expect(await tokens.revoke('000000000000')).toBe(false);
      expect(await tokens.countActive()).toBe(1);
    });
  });

  describe('countActive', () => {
    it('counts only the tokens that are not revoked', async () => {
      expect(await tokens.countActive()).toBe(0);
      const first = await tokens.issue('laptop');
      await tokens.issue('phone');
      await tokens.issue('server');

      await tokens.revoke(first.id);

      expect(await tokens.countActive()).toBe(2);
    });
  });

  describe('list', () => {
    it('returns every token oldest first with no secret or hash field', async () => {
      const laptop = await tokens.issue('laptop');
      advance(1_000);
      const phone = await tokens.issue('phone');
      await tokens.verify(phone.secret);
      await tokens.revoke(laptop.id);

      const listed = await tokens.list();

      expect(listed).toStrictEqual([
        {
          id: laptop.id,
          name: 'laptop',
          createdAt: new Date(START),
          revokedAt: new Date(START + 1_000),
        },
        {
          id: phone.id,
          name: 'phone',
          createdAt: new Date(START + 1_000),
          lastUsedAt: new Date(START + 1_000),
        },
      ]);
      const serialized = JSON.stringify(listed);
      for (const { secret } of [laptop, phone]) {
        expect(serialized).not.toContain(secret);
        expect(serialized).not.toContain(sha256Hex(secret));
      }
    });
  });
});
