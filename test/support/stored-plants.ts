import Database from 'better-sqlite3';
import { withClient } from './postgres-database';

/** A plant as its row stores it, the id exact. */
export interface StoredPlant {
  readonly id: bigint;
  readonly name: string;
  readonly tag: string | null;
}

/**
 * Every plant a SQLite store file holds, by id, read over a read-only connection of our own: WAL
 * lets it read what was committed (in the WAL too) while a server writes, and it changes nothing in
 * the file. Ids are read as bigints, exact beyond 2^53.
 */
export function readSqlitePlants(file: string): StoredPlant[] {
  const reader = new Database(file, { readonly: true, fileMustExist: true });
  try {
    return reader
      .prepare('SELECT id, name, tag FROM plants ORDER BY id')
      .safeIntegers(true)
      .all() as StoredPlant[];
  } finally {
    reader.close();
  }
}

/** The ids of the plants a SQLite store file holds, in order, read as `readSqlitePlants` reads. */
export function readSqlitePlantIds(file: string): bigint[] {
  return readSqlitePlants(file).map((plant) => plant.id);
}

/**
 * Every plant a PostgreSQL store holds, by id, read in a read-only transaction over a connection of
 * our own to `url` (whose search_path names the store's schema).
 */
export async function readPostgresPlants(url: string): Promise<StoredPlant[]> {
  const rows = await withClient(url, async (client) => {
    await client.query('BEGIN READ ONLY');
    const { rows } = await client.query<{ id: string; name: string; tag: string | null }>(
      'SELECT id::text AS id, name, tag FROM plants ORDER BY plants.id',
    );
    await client.query('COMMIT');
    return rows;
  });
  return rows.map((row) => ({ id: BigInt(row.id), name: row.name, tag: row.tag }));
}
