import Database from 'better-sqlite3';

export interface StoredPlant {
  readonly name: string;
  readonly tag?: string;
}

/**
 * Every plant in a SQLite store file, read over a read-only connection of our own (WAL lets it
 * read while the service runs), keyed by the decimal id.
 */
export function dumpPlants(sqlitePath: string): Map<string, StoredPlant> {
  const db = new Database(sqlitePath, { readonly: true, fileMustExist: true });
  try {
    const rows = db
      .prepare('SELECT id, name, tag FROM plants ORDER BY id')
      .safeIntegers(true)
      .all() as Array<{ id: bigint; name: string; tag: string | null }>;
    return new Map(
      rows.map((row) => [
        row.id.toString(),
        row.tag === null ? { name: row.name } : { name: row.name, tag: row.tag },
      ]),
    );
  } finally {
    db.close();
  }
}
