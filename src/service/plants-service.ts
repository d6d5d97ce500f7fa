import type { NewPlant, Plant, PlantStore } from '../store/plant-store';
import { DomainError } from './errors';

export interface PlantsService {
  /** Stores the plant; throws a `conflict` DomainError when its id is taken. */
  create(plant: NewPlant): Promise<Plant>;
  /** Deletes the plant; throws a `not_found` DomainError when no plant has the id. */
  delete(id: bigint): Promise<void>;
}

/** The plant rules over a store: one id, one plant. */
export function createPlantsService({ store }: { store: PlantStore }): PlantsService {
  return {
    async create(plant) {
      const stored = await store.createPlant(plant);
      if (stored === undefined) {
        throw new DomainError('conflict', `A plant with the id ${plant.id} already exists.`);
      }
      return stored;
    },
    async delete(id) {
      if (!(await store.deletePlant(id))) {
        throw new DomainError('not_found', `No plant has the id ${id}.`);
      }
    },
  };
}
