import type { StoreConfig } from '../config';
import type { PlantStore } from './plant-store';
import type * as PostgresStore from './postgres/postgres-plant-store';
import type * as SqliteStore from './sqlite/sqlite-plant-store';

/**
 * What a store reports that fails no request, as the stores' options declare it: PostgreSQL's pool
 * lost an idle connection; SQLite's checkpoints went back to SQLite, or came back to the thread.
 * Each store calls the ones that concern it.
 */
export type StoreEvents = Pick<PostgresStore.PostgresStoreOptions, 'onIdleConnectionLost'> &
  Pick<SqliteStore.SqliteStoreOptions, 'onCheckpointsHandedBack' | 'onCheckpointsTakenBack'>;

/**
 * Opens the store the configuration names: the embedded SQLite file by default, PostgreSQL when
 * configured. Only the chosen store's module is loaded: the pg driver alone took 70 ms of start-up.
 * `first`: the service's first process, which opens the store alone (a single process, or the
 * primary under WORKERS before any worker starts): SQLite's WAL is then checkpointed whole.
 * `events`: what each store reports that is not a request's failure, for the log.
 */
export async function openStore(
  config: StoreConfig,
  { first = false, ...events }: { first?: boolean } & StoreEvents = {},
): Promise<PlantStore> {
  if (config.kind === 'postgres') {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded only when chosen
    const postgres = require('./postgres/postgres-plant-store') as typeof PostgresStore;
    return postgres.openPostgresPlantStore({
      ...config,
      onIdleConnectionLost: events.onIdleConnectionLost,
    });
  }
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded only when chosen
  const sqlite = require('./sqlite/sqlite-plant-store') as typeof SqliteStore;
  return sqlite.openSqlitePlantStore({
    ...config,
    checkpointAtOpen: first,
    onCheckpointsHandedBack: events.onCheckpointsHandedBack,
    onCheckpointsTakenBack: events.onCheckpointsTakenBack,
  });
}
