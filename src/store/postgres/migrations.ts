/**
 * The PostgreSQL schema, one entry per version, in portable SQL (no extensions). An entry is never
 * edited once released: a change is a new entry, applied in order at start and recorded in
 * `schema_version`, as in the SQLite store.
 */
export const postgresMigrations: readonly string[] = [
  `CREATE TABLE plants (
     id   BIGINT PRIMARY KEY,
     name TEXT NOT NULL,
     tag  TEXT
   );
   CREATE TABLE tokens (
     id           TEXT PRIMARY KEY,
     name         TEXT NOT NULL,
     hash         TEXT NOT NULL UNIQUE,
     created_at   TIMESTAMPTZ NOT NULL,
     last_used_at TIMESTAMPTZ,
     revoked_at   TIMESTAMPTZ
   );`,
];
