import type { StoreConfig } from '../config';
import type { PlantStore } from './plant-store';
import { openPostgresPlantStore } from './postgres/postgres-plant-store';
import { openSqlitePlantStore } from './sqlite/sqlite-plant-store';

/** Opens the store the configuration names: the embedded SQLite file by default, PostgreSQL when configured. */
export async function openStore(config: StoreConfig): Promise<PlantStore> {
  return config.kind === 'postgres' ? openPostgresPlantStore(config) : openSqlitePlantStore(config);
}
