import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DomainError } from '../../src/service/errors';
import { createPlantsService, type PlantsService } from '../../src/service/plants-service';
import type { PlantStore } from '../../src/store/plant-store';
import { openSqlitePlantStore } from '../../src/store/sqlite/sqlite-plant-store';
import { readSqlitePlants } from '../support/stored-plants';

/** The code and message of the DomainError the promise rejects with; fails the test otherwise. */
async function domainErrorOf(
  promise: Promise<unknown>,
): Promise<{ code: string; message: string }> {
  const error = await promise.then(
    () => undefined,
    (reason: unknown) => reason,
  );
  expect(error).toBeInstanceOf(DomainError);
  const { code, message } = error as DomainError;
  return { code, message };
}

describe('createPlantsService', () => {
  let dir: string;
  let file: string;
  let store: PlantStore;
  let plants: PlantsService;

  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'plants-service-'));
    file = path.join(dir, 'plants.sqlite');
    store = openSqlitePlantStore({
      path: file,
      synchronous: 'FULL',
      busyTimeoutMs: 1000,
    });
    plants = createPlantsService({ store });
  });

  afterEach(async () => {
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  describe('create', () => {
    it('returns the stored plant with its tag', async () => {
      expect(await plants.create({ id: 1n, name: 'Monstera', tag: 'tropical' })).toStrictEqual({
        name: 'Monstera',
        tag: 'tropical',
      });
    });

    it('returns the stored plant without a tag key when no tag is given', async () => {
      const created = await plants.create({ id: 1n, name: 'Monstera' });

      expect(created).toStrictEqual({ name: 'Monstera' });
      expect(created).not.toHaveProperty('tag');
    });

    it('throws a conflict DomainError naming the id when the id is taken, and keeps the first plant', async () => {
      await plants.create({ id: 42n, name: 'Monstera', tag: 'tropical' });

      expect(
        await domainErrorOf(plants.create({ id: 42n, name: 'Cactus', tag: 'desert' })),
      ).toStrictEqual({
        code: 'conflict',
        message: 'A plant with the id 42 already exists.',
      });
      expect(readSqlitePlants(file)).toStrictEqual([
        { id: 42n, name: 'Monstera', tag: 'tropical' },
      ]);
      expect(await store.deletePlant(42n)).toBe(true);
    });

    it.each([9007199254740993n, 9223372036854775807n, -9223372036854775808n])(
      'throws a conflict whose message names the id %p exactly',
      async (id) => {
        await plants.create({ id, name: 'Monstera' });

        expect(await domainErrorOf(plants.create({ id, name: 'Monstera' }))).toStrictEqual({
          code: 'conflict',
          message: `A plant with the id ${id.toString()} already exists.`,
        });
      },
    );
  });

  describe('delete', () => {
    it('removes the plant so that its id can be created again', async () => {
      await plants.create({ id: 1n, name: 'Monstera' });

      await expect(plants.delete(1n)).resolves.toBeUndefined();
      expect(await plants.create({ id: 1n, name: 'Cactus' })).toStrictEqual({ name: 'Cactus' });
    });

    it('throws a not_found DomainError naming the id when no plant has it', async () => {
      expect(await domainErrorOf(plants.delete(7n))).toStrictEqual({
        code: 'not_found',
        message: 'No plant has the id 7.',
      });
    });

    it('throws not_found the second time the same plant is deleted', async () => {
      await plants.create({ id: 1n, name: 'Monstera' });
      await plants.delete(1n);

      expect(await domainErrorOf(plants.delete(1n))).toStrictEqual({
        code: 'not_found',
        message: 'No plant has the id 1.',
      });
    });

    it('throws not_found for 9007199254740993 when only 9007199254740992 exists, naming it exactly', async () => {
      await plants.create({ id: 9007199254740992n, name: 'Monstera' });

      expect(await domainErrorOf(plants.delete(9007199254740993n))).toStrictEqual({
        code: 'not_found',
        message: 'No plant has the id 9007199254740993.',
      });
    });
  });

  describe('DomainError', () => {
    it('carries its code, message and name', () => {
      const error = new DomainError('conflict', 'A plant with the id 1 already exists.');

      expect(error).toBeInstanceOf(Error);
      expect({ code: error.code, message: error.message, name: error.name }).toStrictEqual({
        code: 'conflict',
        message: 'A plant with the id 1 already exists.',
        name: 'DomainError',
      });
    });
  });
});
