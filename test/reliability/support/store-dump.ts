import Database from 'better-sqlite3';

export interface StoredPlant {
  readonly name: string;
  readonly tag?: string;
}

type Row = { id: bigint; name: string; tag: string | null };

const SELECT_PLANTS = 'SELECT id, name, tag FROM plants ORDER BY id';

function plantsOf(rows: readonly Row[]): Map<string, StoredPlant> {
  return new Map(
    rows.map((row) => [
      row.id.toString(),
      row.tag === null ? { name: row.name } : { name: row.name, tag: row.tag },
    ]),
  );
}

/**
 * Every plant in a SQLite store file, read over a read-only connection of our own (WAL lets it
 * read while the service runs), keyed by the decimal id.
 */
export function dumpPlants(sqlitePath: string): Map<string, StoredPlant> {
  const reader = storeReader(sqlitePath);
  try {
    return reader.read();
  } finally {
    reader.close();
  }
}

/** A read-only connection kept open, for reading the store after every one of many requests. */
export interface StoreReader {
  /** What dumpPlants returns, as of the latest commit. */
  read(): Map<string, StoredPlant>;
  close(): void;
}

export function storeReader(sqlitePath: string): StoreReader {
  const db = new Database(sqlitePath, { readonly: true, fileMustExist: true });
  const select = db.prepare(SELECT_PLANTS).safeIntegers(true);
  return {
    read: () => plantsOf(select.all() as Row[]),
    close: () => db.close(),
  };
}
