import { StoreUnavailableError, type NewToken, type PlantStore } from '../../src/store/plant-store';
import type { StoredPlant } from '../support/stored-plants';

/**
 * An empty store; its rows of plants as a connection of its own reads them, by id; and the function
 * that closes it and removes everything it created.
 */
export interface PlantStoreFixture {
  readonly store: PlantStore;
  readonly readPlants: () => Promise<StoredPlant[]>;
  readonly cleanup: () => Promise<void>;
}

function byId(a: StoredPlant, b: StoredPlant): number {
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

const INT64_MAX = 9223372036854775807n;
const INT64_MIN = -9223372036854775808n;
const TWO_TO_53 = 9007199254740992n;

/** 255 code points from the Mathematical Alphanumeric Symbols block: 510 UTF-16 code units. */
const ASTRAL_255 = String.fromCodePoint(...Array.from({ length: 255 }, (_, i) => 0x1d400 + i));

const CREATED_AT = new Date('2024-03-01T10:20:30.123Z');

function token(n: number, createdAt: Date = CREATED_AT): NewToken {
  return {
    id: `token${n}`.padStart(12, '0'),
    name: `token ${n}`,
    hash: n.toString(16).padStart(64, '0'),
    createdAt,
  };
}

const first = token(1);
const second = token(2);

/** Runs the behaviour every PlantStore must have against a fresh store from `makeStore` per test. */
export function describePlantStoreContract(
  name: string,
  makeStore: () => Promise<PlantStoreFixture>,
): void {
  describe(`PlantStore contract: ${name}`, () => {
    let fixture: PlantStoreFixture | undefined;
    let store: PlantStore;

    let readPlants: () => Promise<StoredPlant[]>;

    beforeEach(async () => {
      fixture = await makeStore();
      ({ store, readPlants } = fixture);
    });

    afterEach(async () => {
      await fixture?.cleanup();
      fixture = undefined;
    });

    describe('createPlant', () => {
      it('createPlant(plant) returns the name and tag of the stored plant', async () => {
        const created = await store.createPlant({ id: 1n, name: 'Monstera', tag: 'tropical' });

        expect(created).toStrictEqual({ name: 'Monstera', tag: 'tropical' });
      });

      it('createPlant(plant) returns the name with no tag key when the plant has no tag', async () => {
        const created = await store.createPlant({ id: 1n, name: 'Monstera' });

        expect(created).toStrictEqual({ name: 'Monstera' });
        expect(Object.keys(created ?? {})).toEqual(['name']);
      });

      it('createPlant(plant) returns undefined when the id is taken, and the first plant stays', async () => {
        await store.createPlant({ id: 1n, name: 'Monstera', tag: 'tropical' });

        expect(await store.createPlant({ id: 1n, name: 'Cactus', tag: 'desert' })).toBeUndefined();
        expect(
          await store.createPlant({ id: 1n, name: 'Monstera', tag: 'tropical' }),
        ).toBeUndefined();
        expect(await readPlants()).toStrictEqual([{ id: 1n, name: 'Monstera', tag: 'tropical' }]);
        expect(await store.deletePlant(1n)).toBe(true);
        expect(await readPlants()).toStrictEqual([]);
        expect(await store.deletePlant(1n)).toBe(false);
      });

      it('createPlant(plant) stores plants with different ids side by side', async () => {
        expect(await store.createPlant({ id: 1n, name: 'Monstera' })).toStrictEqual({
          name: 'Monstera',
        });
        expect(await store.createPlant({ id: 2n, name: 'Cactus' })).toStrictEqual({
          name: 'Cactus',
        });
        expect(await store.createPlant({ id: 2n, name: 'Cactus' })).toBeUndefined();
      });

      it('createPlant(plant) accepts an id again after deletePlant removed its plant', async () => {
        await store.createPlant({ id: 1n, name: 'Monstera', tag: 'tropical' });
        await store.deletePlant(1n);

        expect(await store.createPlant({ id: 1n, name: 'Cactus' })).toStrictEqual({
          name: 'Cactus',
        });
        expect(await store.createPlant({ id: 1n, name: 'Fern' })).toBeUndefined();
      });
    });

    describe('deletePlant', () => {
      it('deletePlant(id) returns true and removes the plant when a plant has the id', async () => {
        await store.createPlant({ id: 1n, name: 'Monstera' });

        expect(await store.deletePlant(1n)).toBe(true);
        expect(await store.deletePlant(1n)).toBe(false);
      });

      it('deletePlant(id) returns false when no plant has the id', async () => {
        expect(await store.deletePlant(1n)).toBe(false);
      });

      it('deletePlant(id) leaves the plants with other ids in place', async () => {
        await store.createPlant({ id: 1n, name: 'Monstera' });
        await store.createPlant({ id: 2n, name: 'Cactus' });

        expect(await store.deletePlant(1n)).toBe(true);
        expect(await store.createPlant({ id: 2n, name: 'Cactus' })).toBeUndefined();
        expect(await store.deletePlant(2n)).toBe(true);
      });
    });

    describe('plant ids over the int64 range', () => {
      it.each([INT64_MAX, INT64_MIN, 0n, -1n])(
        'createPlant and deletePlant keep the id %p exact',
        async (id) => {
          expect(await store.createPlant({ id, name: 'Monstera' })).toStrictEqual({
            name: 'Monstera',
          });
          expect(await store.createPlant({ id, name: 'Monstera' })).toBeUndefined();
          expect(await store.deletePlant(id)).toBe(true);
          expect(await store.deletePlant(id)).toBe(false);
        },
      );

      it('createPlant(plant) treats 9007199254740992 and 9007199254740993 as two plants', async () => {
        expect(await store.createPlant({ id: TWO_TO_53, name: 'even' })).toStrictEqual({
          name: 'even',
        });
        expect(await store.createPlant({ id: TWO_TO_53 + 1n, name: 'odd' })).toStrictEqual({
          name: 'odd',
        });

        expect(await store.deletePlant(TWO_TO_53 + 1n)).toBe(true);
        expect(await store.createPlant({ id: TWO_TO_53, name: 'even' })).toBeUndefined();
        expect(await store.deletePlant(TWO_TO_53 + 1n)).toBe(false);
        expect(await store.deletePlant(TWO_TO_53)).toBe(true);
      });

      it('deletePlant(id) returns false for a neighbour of a stored id near the int64 bounds', async () => {
        await store.createPlant({ id: INT64_MAX - 1n, name: 'below max' });
        await store.createPlant({ id: INT64_MIN + 1n, name: 'above min' });

        expect(await store.deletePlant(INT64_MAX)).toBe(false);
        expect(await store.deletePlant(INT64_MIN)).toBe(false);
        expect(await store.deletePlant(INT64_MAX - 1n)).toBe(true);
        expect(await store.deletePlant(INT64_MIN + 1n)).toBe(true);
      });
    });

    describe('plant names and tags in Unicode', () => {
      it.each([
        ['emoji', '🌵 Saguaro 🌱', '👩‍🌾🏳️‍🌈'],
        ['combining characters', 'Cafe\u0301 Ro\u0308schen', 'n\u0303'],
        ['precomposed characters', 'Caf\u00e9 R\u00f6schen', '\u00f1'],
        ['CJK', '多肉植物の盆栽', '観葉植物'],
        ['255 astral code points', ASTRAL_255, ASTRAL_255],
      ])(
        'createPlant(plant) returns %s exactly and the plant exists afterwards',
        async (_, name, tag) => {
          expect(await store.createPlant({ id: 7n, name, tag })).toStrictEqual({ name, tag });
          expect(await store.createPlant({ id: 7n, name, tag })).toBeUndefined();
        },
      );
    });

    describe('insertToken and findActiveToken', () => {
      it('findActiveToken(hash) returns the token, createdAt as an equal Date, no lastUsedAt or revokedAt', async () => {
        await store.insertToken(first);

        const found = await store.findActiveToken(first.hash);

        expect(found).toStrictEqual({ id: first.id, name: first.name, createdAt: first.createdAt });
        expect(found?.createdAt).toBeInstanceOf(Date);
        expect(found?.createdAt.getTime()).toBe(first.createdAt.getTime());
        expect(found).not.toHaveProperty('lastUsedAt');
        expect(found).not.toHaveProperty('revokedAt');
      });

      it('findActiveToken(hash) returns the token whose hash matches among several', async () => {
        await store.insertToken(first);
        await store.insertToken(second);

        expect((await store.findActiveToken(second.hash))?.id).toBe(second.id);
      });

      it('findActiveToken(hash) returns undefined when no token has the hash', async () => {
        await store.insertToken(first);

        expect(await store.findActiveToken(second.hash)).toBeUndefined();
      });

      it('findActiveToken(hash) returns undefined for a revoked token', async () => {
        await store.insertToken(first);
        await store.revokeToken(first.id, new Date('2024-03-02T00:00:00.001Z'));

        expect(await store.findActiveToken(first.hash)).toBeUndefined();
      });
    });

    describe('touchToken', () => {
      const usedAt = new Date('2024-03-05T08:09:10.987Z');

      it('touchToken(id, at) sets lastUsedAt, as a Date, for findActiveToken and listTokens', async () => {
        await store.insertToken(first);

        await store.touchToken(first.id, usedAt);

        const expected = {
          id: first.id,
          name: first.name,
          createdAt: first.createdAt,
          lastUsedAt: usedAt,
        };
        const found = await store.findActiveToken(first.hash);
        expect(found).toStrictEqual(expected);
        expect(found?.lastUsedAt).toBeInstanceOf(Date);
        expect(found?.lastUsedAt?.getTime()).toBe(usedAt.getTime());
        expect(await store.listTokens()).toStrictEqual([expected]);
      });

      it('touchToken(id, at) replaces an earlier lastUsedAt', async () => {
        const later = new Date('2024-03-06T00:00:00.001Z');
        await store.insertToken(first);

        await store.touchToken(first.id, usedAt);
        await store.touchToken(first.id, later);

        expect((await store.findActiveToken(first.hash))?.lastUsedAt).toEqual(later);
      });

      it('touchToken(id, at) leaves the other tokens untouched', async () => {
        await store.insertToken(first);
        await store.insertToken(second);

        await store.touchToken(first.id, usedAt);

        expect(await store.findActiveToken(second.hash)).not.toHaveProperty('lastUsedAt');
      });
    });

    describe('listTokens', () => {
      it('listTokens() returns an empty array when no token exists', async () => {
        expect(await store.listTokens()).toStrictEqual([]);
      });

      it('listTokens() returns every token oldest first, whatever the insertion order', async () => {
        const newest = token(1, new Date('2024-03-03T00:00:00.003Z'));
        const oldest = token(2, new Date('2024-03-01T00:00:00.001Z'));
        const middle = token(3, new Date('2024-03-02T00:00:00.002Z'));
        for (const t of [newest, oldest, middle]) await store.insertToken(t);

        expect(await store.listTokens()).toStrictEqual(
          [oldest, middle, newest].map(({ id, name, createdAt }) => ({ id, name, createdAt })),
        );
      });

      it('listTokens() includes revoked tokens with their revokedAt as a Date', async () => {
        const revokedAt = new Date('2024-03-09T11:12:13.456Z');
        await store.insertToken(first);
        await store.revokeToken(first.id, revokedAt);

        const listed = await store.listTokens();

        expect(listed).toStrictEqual([
          { id: first.id, name: first.name, createdAt: first.createdAt, revokedAt },
        ]);
        expect(listed[0]?.revokedAt).toBeInstanceOf(Date);
        expect(listed[0]?.revokedAt?.getTime()).toBe(revokedAt.getTime());
        expect(listed[0]).not.toHaveProperty('lastUsedAt');
      });
    });

    describe('revokeToken', () => {
      const revokedAt = new Date('2024-03-09T11:12:13.456Z');

      it('revokeToken(id, at) returns true for an active token', async () => {
        await store.insertToken(first);

        expect(await store.revokeToken(first.id, revokedAt)).toBe(true);
      });

      it('revokeToken(id, at) returns false the second time and keeps the first revokedAt', async () => {
        await store.insertToken(first);
        await store.revokeToken(first.id, revokedAt);

        expect(await store.revokeToken(first.id, new Date('2024-04-01T00:00:00.000Z'))).toBe(false);
        expect((await store.listTokens())[0]?.revokedAt).toEqual(revokedAt);
      });

      it('revokeToken(id, at) returns false when no token has the id', async () => {
        await store.insertToken(first);

        expect(await store.revokeToken(second.id, revokedAt)).toBe(false);
        expect(await store.countActiveTokens()).toBe(1);
      });
    });

    describe('countActiveTokens', () => {
      it('countActiveTokens() returns 0 when no token exists', async () => {
        expect(await store.countActiveTokens()).toBe(0);
      });

      it('countActiveTokens() counts only the tokens that are not revoked', async () => {
        for (const n of [1, 2, 3]) await store.insertToken(token(n));
        await store.revokeToken(second.id, new Date('2024-03-02T00:00:00.000Z'));

        expect(await store.countActiveTokens()).toBe(2);
      });
    });

    describe('calls made together (batched or group-committed)', () => {
      it('answers each of many creates its own result, and stores each plant exactly', async () => {
        await store.createPlant({ id: 5n, name: 'already there' });
        const names = ['a"b\\c', '{x,y}', 'NULL', ' padded ', ASTRAL_255, "it's"];
        const plants = Array.from({ length: 60 }, (_, i) => ({
          id: BigInt(i) * TWO_TO_53 - INT64_MAX,
          name: names[i % names.length] as string,
          ...(i % 3 === 0 ? {} : { tag: names[(i + 1) % names.length] as string }),
        }));
        const results = await Promise.all([
          ...plants.map((plant) => store.createPlant(plant)),
          store.createPlant({ id: 5n, name: 'taken' }),
        ]);

        expect(results).toStrictEqual([
          ...plants.map(({ name, tag }) => (tag === undefined ? { name } : { name, tag })),
          undefined,
        ]);
        // Each stored exactly, as another connection reads it back; a second create of the same
        // plant finds it, a delete removes it.
        expect(await readPlants()).toStrictEqual(
          [
            { id: 5n, name: 'already there', tag: null },
            ...plants.map(({ id, name, tag }) => ({ id, name, tag: tag ?? null })),
          ].sort(byId),
        );
        expect(await Promise.all(plants.map((plant) => store.createPlant(plant)))).toEqual(
          plants.map(() => undefined),
        );
        expect(await Promise.all(plants.map((plant) => store.deletePlant(plant.id)))).toEqual(
          plants.map(() => true),
        );
      });

      it('stores only the first of two creates of one id made together', async () => {
        const [firstCreate, secondCreate] = await Promise.all([
          store.createPlant({ id: 7n, name: 'first' }),
          store.createPlant({ id: 7n, name: 'second' }),
        ]);

        expect([firstCreate, secondCreate]).toStrictEqual([{ name: 'first' }, undefined]);
        expect(await store.createPlant({ id: 7n, name: 'third' })).toBeUndefined();
      });

      it('deletes a plant once when two deletes of its id are made together', async () => {
        await store.createPlant({ id: 7n, name: 'only' });

        expect(
          await Promise.all([store.deletePlant(7n), store.deletePlant(7n), store.deletePlant(8n)]),
        ).toEqual([true, false, false]);
      });

      it('answers each of many token look-ups made together by its own hash', async () => {
        for (const n of [1, 2, 3]) await store.insertToken(token(n));
        await store.revokeToken(second.id, new Date('2024-03-02T00:00:00.000Z'));

        const found = await Promise.all(
          [1, 2, 3, 1, 4].map((n) => store.findActiveToken(token(n).hash)),
        );

        expect(found.map((record) => record?.id)).toEqual([
          token(1).id,
          undefined,
          token(3).id,
          token(1).id,
          undefined,
        ]);
        expect(found[0]).toStrictEqual(found[3]);
      });
    });

    describe('ping', () => {
      it('ping() resolves', async () => {
        await expect(store.ping()).resolves.toBeUndefined();
      });
    });

    describe('close', () => {
      it('refuses every call after it as unavailable, and resolves when called again', async () => {
        await store.close();

        await expect(store.createPlant({ id: 1n, name: 'a' })).rejects.toBeInstanceOf(
          StoreUnavailableError,
        );
        await expect(store.findActiveToken(first.hash)).rejects.toBeInstanceOf(
          StoreUnavailableError,
        );
        await expect(store.ping()).rejects.toBeInstanceOf(StoreUnavailableError);
        await expect(store.close()).resolves.toBeUndefined();
      });
    });
  });
}
