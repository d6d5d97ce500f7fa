import fs from 'node:fs';
import path from 'node:path';
import { StoreUnavailableError, type PlantStore } from '../../src/store/plant-store';
import {
  isUnavailable,
  openPostgresPlantStore,
} from '../../src/store/postgres/postgres-plant-store';
import {
  createTestSchema,
  describeWithPostgres,
  testDatabasePort,
  type TestSchema,
} from '../support/postgres';
import { createTestDatabase, type TestDatabase } from '../support/postgres-database';
import { startUnixSocketProxy, type UnixSocketProxy } from '../support/unix-socket-proxy';

const TOKEN = { id: 't1', name: 'one', hash: 'h1', createdAt: new Date() };

/** How each call ended: the code of the cause of a StoreUnavailableError, else what it gave. */
async function outcomes(calls: Promise<unknown>[]): Promise<unknown[]> {
  return (await Promise.allSettled(calls)).map((result) => {
    if (result.status === 'fulfilled') return { resolved: result.value };
    const error = result.reason as Error;
    if (!(error instanceof StoreUnavailableError)) return { rejected: error };
    return { unavailable: (error.cause as { code?: unknown }).code };
  });
}

describe('PostgreSQL store: which failures are unavailable (503), not bugs (500)', () => {
  it.each([
    ['25006', 'read_only_sql_transaction: a standby, or a database set read-only', true],
    ['57000', 'operator_intervention', true],
    ['57014', 'query_canceled: the statement time-out', true],
    ['57P01', 'admin_shutdown', true],
    ['57P03', 'cannot_connect_now: starting up or recovering', true],
    ['57P05', 'idle_session_timeout', true],
    ['58000', 'system_error', true],
    ['58030', 'io_error', true],
    ['55P03', 'lock_not_available: the lock time-out', true],
    ['08P01', "protocol_violation, as PgBouncer's errors are", true],
    ['53300', 'too_many_connections', true],
    ['57P04', 'database_dropped', false],
    ['58P01', 'undefined_file', false],
    ['23505', 'unique_violation', false],
    ['22P05', 'untranslatable_character', false],
    ['28P01', 'invalid_password', false],
    ['42P05', 'duplicate_prepared_statement', false],
  ])('SQLSTATE %s (%s) is unavailable: %p', (code, _name, unavailable) => {
    expect(isUnavailable(Object.assign(new Error('from the server'), { code }))).toBe(unavailable);
  });

  it.each([
    ['ENOENT', 'connect', true],
    ['EAGAIN', 'connect', true],
    ['ECONNREFUSED', 'connect', true],
    ['EACCES', 'connect', false],
    ['ENOTDIR', 'connect', false],
    // A certificate file named in the URL and missing: a mistake, not the moment.
    ['ENOENT', 'open', false],
  ])('%s of %s is unavailable: %p', (code, syscall, unavailable) => {
    const error = Object.assign(new Error(`${syscall} ${code}`), { code, syscall });
    expect(isUnavailable(error)).toBe(unavailable);
  });
});

describeWithPostgres('PostgreSQL store: when the database cannot take a request', () => {
  describe('over a Unix socket (host=/dir in the URL)', () => {
    let schema: TestSchema;
    let proxy: UnixSocketProxy;
    let store: PlantStore;
    beforeEach(async () => {
      schema = await createTestSchema();
      // Not the server's own port: the socket file's name must come from the URL.
      proxy = await startUnixSocketProxy(testDatabasePort(), 15432);
      // The query's host and port take the place of the URL's.
      const url = new URL(schema.url);
      url.searchParams.set('host', proxy.dir);
      url.searchParams.set('port', String(proxy.port));
      store = await openPostgresPlantStore({ ...schema.options, url: url.toString() });
    });
    afterEach(async () => {
      await store?.close();
      await proxy?.close();
      await schema?.drop();
    });

    it('fails every call as unavailable while the socket file is gone (ENOENT), and recovers when it is back', async () => {
      expect(await store.createPlant({ id: 1n, name: 'before' })).toEqual({ name: 'before' });
      await store.insertToken(TOKEN);

      await proxy.stop();
      expect(fs.existsSync(path.join(proxy.dir, `.s.PGSQL.${proxy.port}`))).toBe(false);
      // The pool's connections have seen their sockets end: every call needs a new one.
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(
        await outcomes([
          store.createPlant({ id: 2n, name: 'during' }),
          store.deletePlant(1n),
          store.findActiveToken(TOKEN.hash),
          store.listTokens(),
          store.ping(),
        ]),
      ).toEqual(Array.from({ length: 5 }, () => ({ unavailable: 'ENOENT' })));

      await proxy.start();
      await store.ping();
      expect(await store.deletePlant(1n)).toBe(true);
      expect(await store.deletePlant(2n)).toBe(false);
    });
  });

  describe('over a database that turned read-only', () => {
    let database: TestDatabase;
    let store: PlantStore | undefined;
    const setReadOnly = (on: boolean) =>
      database.admin(
        on
          ? `ALTER DATABASE ${database.name} SET default_transaction_read_only = on`
          : `ALTER DATABASE ${database.name} RESET default_transaction_read_only`,
      );
    beforeEach(async () => {
      database = await createTestDatabase('read_only');
      store = await openPostgresPlantStore(database.options);
      await store.createPlant({ id: 1n, name: 'before' });
      await store.insertToken(TOKEN);
    });
    afterEach(async () => {
      await store?.close();
      await database.drop();
    });

    it('fails every write as unavailable (25006), answers reads, and takes writes again once it may', async () => {
      const writable = store as PlantStore;
      // As after a failover to a standby: the pool's next connections cannot write.
      await setReadOnly(true);
      await database.terminateConnections();

      expect(
        await outcomes([
          writable.createPlant({ id: 2n, name: 'during' }),
          writable.deletePlant(1n),
          writable.insertToken({ ...TOKEN, id: 't2', hash: 'h2' }),
          writable.touchToken(TOKEN.id, new Date()),
          writable.revokeToken(TOKEN.id, new Date()),
        ]),
      ).toEqual(Array.from({ length: 5 }, () => ({ unavailable: '25006' })));
      expect(await writable.findActiveToken(TOKEN.hash)).toMatchObject({ id: TOKEN.id });
      expect(await writable.countActiveTokens()).toBe(1);

      await setReadOnly(false);
      await database.terminateConnections();
      expect(await writable.createPlant({ id: 2n, name: 'after' })).toEqual({ name: 'after' });
      expect(await writable.deletePlant(1n)).toBe(true);
      expect(await writable.revokeToken(TOKEN.id, new Date())).toBe(true);
    });

    it('fails ping as unavailable on a read-only session, and resolves as soon as a new one may write', async () => {
      const pinged = store as PlantStore;
      await pinged.ping();
      await setReadOnly(true);
      await database.terminateConnections();
      expect(await outcomes([pinged.ping()])).toEqual([{ unavailable: '25006' }]);
      expect(await outcomes([pinged.ping()])).toEqual([{ unavailable: '25006' }]);

      // No connection is ended this time: only a new session reads the database's settings. The
      // read-only one was closed, so /readyz alone, with no other traffic, sees it writable again.
      await setReadOnly(false);
      await pinged.ping();
      expect(await pinged.createPlant({ id: 2n, name: 'after' })).toEqual({ name: 'after' });
    });
  });
});
