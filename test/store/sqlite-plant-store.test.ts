import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { StoreUnavailableError, type PlantStore } from '../../src/store/plant-store';
import { sqliteMigrations } from '../../src/store/sqlite/migrations';
import {
  createSqlitePlantStore,
  openSqlitePlantStore,
  type SqliteSynchronous,
} from '../../src/store/sqlite/sqlite-plant-store';
import { readSqlitePlants } from '../support/stored-plants';
import { describePlantStoreContract } from './plant-store.contract';
import { descriptorsOf } from '../support/descriptors';

function makeTempDir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'plant-store-'));
}

describePlantStoreContract('SQLite file', async () => {
  const dir = makeTempDir();
  const file = path.join(dir, 'plants.sqlite');
  const store = openSqlitePlantStore({ path: file, synchronous: 'FULL', busyTimeoutMs: 1000 });
  return {
    store,
    readPlants: async () => readSqlitePlants(file),
    cleanup: async () => {
      await store.close();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
});

describe('openSqlitePlantStore', () => {
  let dir: string;
  let file: string;
  const opened: PlantStore[] = [];
  const readers: Database.Database[] = [];

  function open(synchronous: SqliteSynchronous = 'FULL', at = file): PlantStore {
    const store = openSqlitePlantStore({ path: at, synchronous, busyTimeoutMs: 1000 });
    opened.push(store);
    return store;
  }

  async function close(store: PlantStore): Promise<void> {
    opened.splice(opened.indexOf(store), 1);
    await store.close();
  }

  /** A second, read-only connection to the file, as another process would have. */
  function inspect(at = file): Database.Database {
    const reader = new Database(at, { readonly: true, fileMustExist: true });
    readers.push(reader);
    return reader;
  }

  function schemaVersions(): unknown[] {
    return inspect()
      .prepare('SELECT version, applied_at FROM schema_version ORDER BY version')
      .all();
  }

  beforeEach(() => {
    dir = makeTempDir();
    file = path.join(dir, 'plants.sqlite');
  });

  afterEach(async () => {
    jest.restoreAllMocks();
    for (const reader of readers.splice(0)) reader.close();
    for (const store of opened.splice(0)) await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  describe('the database file', () => {
    it('creates the file when it does not exist', () => {
      open();

      expect(fs.statSync(file).isFile()).toBe(true);
    });

    it('creates the missing directories above the file', () => {
      const nested = path.join(dir, 'not', 'yet', 'there', 'plants.sqlite');

      open('FULL', nested);

      expect(fs.statSync(nested).isFile()).toBe(true);
    });

    it('throws SQLITE_CANTOPEN when the path is a directory', () => {
      expect(() => open('FULL', dir)).toThrow(
        expect.objectContaining({ code: 'SQLITE_CANTOPEN' }) as Error,
      );
    });

    // SQLite resolves the link and keeps the WAL beside the file it leads to: that WAL is the one
    // a FULL store must sync, not whatever sits at the link's own name plus -wal.
    it('syncs the WAL of the file a symlinked path leads to, and leaves alone a file named after the link', async () => {
      const real = path.join(dir, 'real', 'plants.sqlite');
      const link = path.join(dir, 'link.sqlite');
      fs.mkdirSync(path.dirname(real));
      fs.symlinkSync(real, link);
      fs.writeFileSync(`${link}-wal`, 'not a WAL');

      const store = open('FULL', link);
      await store.createPlant({ id: 1n, name: 'Monstera' });

      expect(descriptorsOf(`${link}-wal`)).toBe(0);
      // SQLite's own descriptor, and the store's for its syncs.
      expect(descriptorsOf(`${real}-wal`)).toBe(2);
      await close(store);
      expect(fs.readFileSync(`${link}-wal`, 'utf8')).toBe('not a WAL');
      expect(await open('FULL', real).createPlant({ id: 1n, name: 'Other' })).toBeUndefined();
    });

    it('opens a FULL store through a symlink with nothing named after the link', async () => {
      const real = path.join(dir, 'real', 'plants.sqlite');
      const link = path.join(dir, 'link.sqlite');
      fs.mkdirSync(path.dirname(real));
      fs.symlinkSync(real, link);

      const store = open('FULL', link);
      await store.createPlant({ id: 1n, name: 'Monstera' });
      await close(store);

      expect(fs.existsSync(`${link}-wal`)).toBe(false);
      expect(await open('FULL', real).createPlant({ id: 1n, name: 'Other' })).toBeUndefined();
    });

    it('closes the connection and the WAL descriptor when the store cannot be built over the file', () => {
      // Every migration recorded, but no tables: nothing fails until the store's statements are
      // prepared, after the WAL's descriptor is open.
      const setup = new Database(file);
      setup.pragma('journal_mode = WAL');
      setup.exec(
        'CREATE TABLE schema_version (version INTEGER NOT NULL, applied_at INTEGER NOT NULL)',
      );
      setup.prepare('INSERT INTO schema_version VALUES (?, 0)').run(sqliteMigrations.length);
      setup.close();

      expect(() => open()).toThrow('no such table: plants');

      expect(descriptorsOf(file)).toBe(0);
      // SQLite removes the WAL at the last connection's close.
      expect(fs.existsSync(`${file}-wal`)).toBe(false);
    });
  });

  describe('pragmas', () => {
    it('puts the file in WAL journal mode', () => {
      open();

      expect(inspect().pragma('journal_mode', { simple: true })).toBe('wal');
    });

    it('refuses a database that cannot be in WAL mode, such as an in-memory one', () => {
      expect(() =>
        openSqlitePlantStore({ path: ':memory:', synchronous: 'NORMAL', busyTimeoutMs: 50 }),
      ).toThrow(':memory: cannot be put in WAL mode (its journal mode is memory).');
    });

    // synchronous belongs to a connection and is not stored in the file, so a second connection
    // only shows its own default; the store's own connection is the one that has to be asked.
    // FULL is kept by the store itself: its connection runs at NORMAL, and each commit's WAL is
    // synced before the commit's writes are answered (group-commit.test.ts).
    it.each<[SqliteSynchronous, number]>([
      ['FULL', 1],
      ['NORMAL', 1],
    ])('runs the store connection for %s at synchronous %i', (synchronous, level) => {
      const pragma = jest.spyOn(Database.prototype, 'pragma');
      open(synchronous);
      const connection = pragma.mock.contexts[0] as Database.Database;

      expect(connection.pragma('synchronous', { simple: true })).toBe(level);
    });
  });

  describe('migrations', () => {
    it('records each migration once in schema_version', () => {
      open();

      expect(schemaVersions()).toStrictEqual(
        sqliteMigrations.map((_, i) => ({ version: i + 1, applied_at: expect.any(Number) })),
      );
    });

    it('does not re-apply migrations when an existing file is reopened', async () => {
      await close(open());
      const before = schemaVersions();

      await close(open());
      open();

      expect(schemaVersions()).toStrictEqual(before);
      expect(before).toHaveLength(sqliteMigrations.length);
    });
  });

  describe('durability', () => {
    it('keeps plants and tokens after close and reopen', async () => {
      const first = open();
      await first.createPlant({ id: 9007199254740993n, name: 'Monstera' });
      const token = {
        id: '0123456789ab',
        name: 'laptop',
        hash: 'f'.repeat(64),
        createdAt: new Date('2024-03-01T10:20:30.123Z'),
      };
      await first.insertToken(token);
      await close(first);

      const reopened = open();

      expect(await reopened.createPlant({ id: 9007199254740993n, name: 'Other' })).toBeUndefined();
      expect(await reopened.findActiveToken(token.hash)).toStrictEqual({
        id: token.id,
        name: token.name,
        createdAt: token.createdAt,
      });
    });

    it('with checkpointAtOpen, copies a WAL left behind into the database file and empties it before serving', async () => {
      // Another connection keeps the file open, so that the first store's close leaves its WAL
      // as a crash would: frames that only the WAL holds.
      const first = open();
      const other = inspect();
      // A read opens the WAL's index, which the connection then holds until it closes.
      expect(other.prepare('SELECT COUNT(*) FROM plants').pluck().get()).toBe(0);
      for (let id = 1n; id <= 200n; id++) await first.createPlant({ id, name: `plant ${id}` });
      await close(first);
      const wal = `${file}-wal`;
      const walBytes = fs.statSync(wal).size;
      expect(walBytes).toBeGreaterThan(0);

      // Without it, the WAL is left as it is.
      await close(open());
      expect(fs.statSync(wal).size).toBe(walBytes);

      const store = openSqlitePlantStore({
        path: file,
        synchronous: 'FULL',
        busyTimeoutMs: 1000,
        checkpointAtOpen: true,
      });
      opened.push(store);
      expect(fs.statSync(wal).size).toBe(0);
      // Every plant is in the database file itself: a copy of it alone, without the WAL, has them.
      const copy = path.join(dir, 'copy.sqlite');
      fs.copyFileSync(file, copy);
      expect(readSqlitePlants(copy)).toHaveLength(200);
      expect(other.prepare('SELECT COUNT(*) FROM plants').pluck().get()).toBe(200);
    });

    it('with checkpointAtOpen, refuses to open while another connection keeps the checkpoint from ending', async () => {
      const first = open();
      await first.createPlant({ id: 1n, name: 'in the WAL' });
      // A read transaction holds a snapshot, which the checkpoint may not overwrite.
      const other = inspect();
      other.prepare('BEGIN').run();
      expect(other.prepare('SELECT COUNT(*) FROM plants').pluck().get()).toBe(1);
      await first.createPlant({ id: 2n, name: 'after the snapshot' });

      expect(() =>
        openSqlitePlantStore({
          path: file,
          synchronous: 'FULL',
          busyTimeoutMs: 50,
          checkpointAtOpen: true,
        }),
      ).toThrow(`Another connection to ${file} kept its WAL from being checkpointed at start`);
      other.prepare('COMMIT').run();
    });

    it('leaves its WAL as it is at close once a failed sync stopped it, for the next start to recover', async () => {
      await close(open());
      const db = new Database(file, { fileMustExist: true });
      db.pragma('synchronous = NORMAL');
      let failing = false;
      const eio = Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' });
      const store = createSqlitePlantStore(db, {
        sync: (done) => done(failing ? eio : null),
        pending: () => false,
        close: () => undefined,
      });
      await store.createPlant({ id: 1n, name: 'synced' });
      failing = true;
      await expect(store.createPlant({ id: 2n, name: 'not synced' })).rejects.toBeInstanceOf(
        StoreUnavailableError,
      );

      await store.close();
      // Closed, the file's last connection would have checkpointed the WAL and deleted it.
      expect(fs.statSync(`${file}-wal`).size).toBeGreaterThan(0);
      expect(inspect().prepare('SELECT COUNT(*) FROM plants').pluck().get()).toBe(2);
      db.close();
    });

    it('stores ids, names and tags exactly as given, and a refused duplicate changes nothing', async () => {
      const store = open();
      const name = 'Cafe\u0301 🌵 多肉植物 ' + String.fromCodePoint(0x1f331).repeat(100);
      await store.createPlant({ id: -9223372036854775808n, name, tag: '👩‍🌾' });
      await store.createPlant({ id: 9223372036854775807n, name: 'untagged' });
      await store.createPlant({ id: 9223372036854775807n, name: 'duplicate', tag: 'x' });

      const rows = inspect()
        .prepare('SELECT id, name, tag FROM plants ORDER BY id')
        .safeIntegers(true)
        .all();

      expect(rows).toStrictEqual([
        { id: -9223372036854775808n, name, tag: '👩‍🌾' },
        { id: 9223372036854775807n, name: 'untagged', tag: null },
      ]);
    });
  });

  describe('two stores on the same file', () => {
    it('each sees the plants the other created and deleted', async () => {
      const first = open();
      const second = open();

      await first.createPlant({ id: 1n, name: 'Monstera' });
      await second.createPlant({ id: 2n, name: 'Cactus' });

      expect(await first.createPlant({ id: 2n, name: 'Cactus' })).toBeUndefined();
      expect(await second.deletePlant(1n)).toBe(true);
      expect(await first.deletePlant(1n)).toBe(false);
    });

    it('refuses through the second store an id created through the first', async () => {
      const first = open();
      const second = open();
      await first.createPlant({ id: 9223372036854775807n, name: 'Monstera' });

      expect(
        await second.createPlant({ id: 9223372036854775807n, name: 'Cactus' }),
      ).toBeUndefined();
    });

    it('each sees the tokens the other inserted, touched and revoked', async () => {
      const first = open();
      const second = open();
      const createdAt = new Date('2024-03-01T10:20:30.123Z');
      const lastUsedAt = new Date('2024-03-02T10:20:30.456Z');
      await first.insertToken({
        id: '0123456789ab',
        name: 'laptop',
        hash: 'a'.repeat(64),
        createdAt,
      });
      await second.touchToken('0123456789ab', lastUsedAt);

      expect(await first.findActiveToken('a'.repeat(64))).toStrictEqual({
        id: '0123456789ab',
        name: 'laptop',
        createdAt,
        lastUsedAt,
      });

      expect(await second.revokeToken('0123456789ab', lastUsedAt)).toBe(true);
      expect(await first.findActiveToken('a'.repeat(64))).toBeUndefined();
      expect(await first.countActiveTokens()).toBe(0);
    });
  });

  describe('tokenChanges', () => {
    const token = {
      id: '0123456789ab',
      name: 'laptop',
      hash: 'a'.repeat(64),
      createdAt: new Date('2024-03-01T10:20:30.123Z'),
    };

    function version(store: PlantStore): number {
      if (store.tokenChanges === undefined) throw new Error('the SQLite store has a token watch');
      return store.tokenChanges.version();
    }

    it('keeps its version while nothing changes, and through its own plant and touch writes', async () => {
      const store = open();
      await store.insertToken(token);
      const before = version(store);

      expect(version(store)).toBe(before);
      await store.createPlant({ id: 1n, name: 'Monstera' });
      await store.deletePlant(1n);
      await store.touchToken(token.id, new Date());
      expect(await store.findActiveToken(token.hash)).toBeDefined();

      expect(version(store)).toBe(before);
    });

    it('moves when the store itself inserts or revokes a token', async () => {
      const store = open();
      const initial = version(store);

      await store.insertToken(token);
      const inserted = version(store);
      await store.revokeToken(token.id, new Date());
      const revoked = version(store);

      expect(inserted).not.toBe(initial);
      expect(revoked).not.toBe(inserted);
    });

    it('moves when another connection commits, and only then', async () => {
      const store = open();
      await store.insertToken(token);
      const other = new Database(file);
      readers.push(other);
      const before = version(store);

      other.prepare('SELECT COUNT(*) FROM tokens').get();
      const afterRead = version(store);
      other.prepare('UPDATE tokens SET revoked_at = 1 WHERE id = ?').run(token.id);
      const afterCommit = version(store);

      expect(afterRead).toBe(before);
      expect(afterCommit).not.toBe(before);
      expect(version(store)).toBe(afterCommit);
      expect(await store.findActiveToken(token.hash)).toBeUndefined();
    });

    // A request still being verified when a shutdown's deadline closes the store answers 503, as
    // it does from the store's methods, not a 500 from a closed database.
    it('throws StoreUnavailableError once the store is closed', async () => {
      const store = open();
      version(store);
      await store.close();

      expect(() => version(store)).toThrow(StoreUnavailableError);
    });
  });
});

describe('a SQLite file shared with another process', () => {
  it('reports StoreUnavailableError when another connection holds the write lock past the busy time-out', async () => {
    const dir = makeTempDir();
    const file = path.join(dir, 'plants.sqlite');
    const store = openSqlitePlantStore({ path: file, synchronous: 'FULL', busyTimeoutMs: 50 });
    const other = new Database(file);
    other.exec('BEGIN IMMEDIATE');
    try {
      await expect(store.createPlant({ id: 1n, name: 'blocked' })).rejects.toBeInstanceOf(
        StoreUnavailableError,
      );
    } finally {
      other.exec('ROLLBACK');
      other.close();
    }
    expect(await store.createPlant({ id: 1n, name: 'after' })).toEqual({ name: 'after' });
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
});
