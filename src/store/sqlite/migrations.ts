/**
 * The SQLite schema, one entry per version. An entry is never edited once released: a change is
 * a new entry, applied in order at start and recorded in `schema_version`.
 */
export const sqliteMigrations: readonly string[] = [
  `CREATE TABLE plants (
     id   INTEGER PRIMARY KEY,
     name TEXT NOT NULL,
     tag  TEXT
   ) STRICT;
   CREATE TABLE tokens (
     id           TEXT PRIMARY KEY,
     name         TEXT NOT NULL,
     hash         TEXT NOT NULL UNIQUE,
     created_at   INTEGER NOT NULL,
     last_used_at INTEGER,
     revoked_at   INTEGER
   ) STRICT;`,
];
