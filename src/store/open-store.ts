import type { Config } from '../config';
import type { PlantStore } from './plant-store';
import { openSqlitePlantStore } from './sqlite/sqlite-plant-store';

/** Opens the store the configuration names: the embedded SQLite file by default. */
export async function openStore(config: Config): Promise<PlantStore> {
  return openSqlitePlantStore(config.sqlite);
}
