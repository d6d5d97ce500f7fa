import { execFileSync } from 'node:child_process';
import type net from 'node:net';
import { DEFAULT_CHECKPOINT_EVERY_WRITES } from '../../src/store/sqlite/wal-checkpoints';
import { logLinesOf, waitFor } from '../support/log-lines';
import { descriptorNumbers } from '../support/descriptors';
import { seriesValue } from '../support/metrics-text';
import { cleanupChildren } from '../support/server-process';
import { readSqlitePlantIds } from '../support/stored-plants';
import { connect } from './support/http';
import { parseResponse, rawCreate } from './support/raw';
import { startService, type Service } from './support/service';

/**
 * The server process out of file descriptors (its limit lowered to what it holds, as a flood of
 * connections leaves it): connections it cannot accept are closed at once, writes over the
 * connections it holds go on being stored, the WAL's checkpoints, whose thread needs a descriptor
 * of its own, go back to SQLite's, which the log says once, and once descriptors are free again it
 * accepts connections as before, and the thread, tried again, takes the checkpoints back.
 */

/** Requests a connection has in flight at a time, written together (pipelined). */
const IN_FLIGHT = 200;

/** The soft and hard limits on open files of a running process. */
function openFilesLimits(pid: number): [string, string] {
  const output = execFileSync(
    'prlimit',
    ['--pid', String(pid), '--nofile', '--output=SOFT,HARD', '--noheadings'],
    { encoding: 'utf8' },
  );
  const [soft, hard] = output.trim().split(/\s+/);
  return [soft!, hard!];
}

/** Sets the soft limit on open files of a running process: no descriptor of `soft` or over opens. */
function limitOpenFiles(pid: number, soft: string, hard: string): void {
  execFileSync('prlimit', ['--pid', String(pid), `--nofile=${soft}:${hard}`]);
}

/**
 * Creates the plants of `ids` over one open connection, IN_FLIGHT requests pipelined at a time,
 * and resolves with the status of each answer, in order; rejects if the connection closes first.
 */
function createOver(socket: net.Socket, token: string, ids: readonly bigint[]): Promise<number[]> {
  const request = (id: bigint) => rawCreate(token, id, `plant ${id}`);
  return new Promise((resolve, reject) => {
    const statuses: number[] = [];
    let pending: Buffer = Buffer.alloc(0);
    let sent = 0;
    const sendMore = () => {
      const upTo = Math.min(ids.length, statuses.length + IN_FLIGHT);
      if (sent < upTo) socket.write(ids.slice(sent, upTo).map(request).join(''));
      sent = upTo;
    };
    const onData = (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      for (;;) {
        const parsed = parseResponse(pending, false);
        if (parsed === undefined) break;
        if (typeof parsed === 'string') return fail(new Error(parsed));
        statuses.push(parsed.status);
        pending = parsed.rest;
      }
      if (statuses.length === ids.length) {
        detach();
        resolve(statuses);
      } else if (statuses.length + IN_FLIGHT / 2 >= sent) {
        sendMore();
      }
    };
    const onClose = () =>
      fail(new Error(`closed after ${statuses.length} of ${ids.length} answers`));
    const fail = (error: Error) => {
      detach();
      reject(error);
    };
    const detach = () => {
      socket.off('data', onData);
      socket.off('close', onClose);
    };
    socket.on('data', onData);
    socket.on('close', onClose);
    sendMore();
  });
}

const ids = (from: number, count: number) =>
  Array.from({ length: count }, (_, i) => BigInt(from + i) * 7919n);

afterAll(cleanupChildren);

/** The message of the warning that checkpoints went back to SQLite. */
const HANDED_BACK = 'WAL checkpoints handed back to SQLite, on the event loop';
/** The message of the line that says they came back to the thread. */
const TAKEN_BACK = 'WAL checkpoints taken back by the checkpoint thread, off the event loop';

describe('a server out of file descriptors', () => {
  let service: Service;
  const sockets: net.Socket[] = [];
  /** Opens a connection to the service, destroyed after the test whatever happens. */
  const open = async () => {
    const socket = await connect(service.target);
    socket.on('error', () => undefined);
    sockets.push(socket);
    return socket;
  };
  beforeAll(async () => {
    const long = '600000';
    service = await startService({
      env: {
        // Nothing may close the connections that hold the descriptors while the test runs.
        KEEP_ALIVE_TIMEOUT_MS: long,
        HEADERS_TIMEOUT_MS: long,
        REQUEST_TIMEOUT_MS: long,
        INACTIVITY_TIMEOUT_MS: long,
      },
    });
  });
  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    await service.server.kill();
  });

  it('closes the connections it cannot accept, goes on storing writes over those it holds, says once that SQLite checkpoints the WAL, and accepts again and takes the checkpoints back once descriptors are free', async () => {
    const pid = service.server.process.pid!;
    const writers = [await open(), await open()];
    // A first create on each: the server has accepted both, and holds a descriptor for each.
    let next = 1;
    for (const writer of writers) {
      expect(await createOver(writer, service.token, ids(next++, 1))).toEqual([200]);
    }
    const held = descriptorNumbers(pid);
    const limit = Math.max(...held) + 1;
    const [soft, hard] = openFilesLimits(pid);
    limitOpenFiles(pid, String(limit), hard);

    // Free numbers below the limit are taken first; the connections past them cannot be accepted,
    // and libuv closes them at once with a descriptor it keeps in reserve for that.
    const flood: net.Socket[] = [];
    for (let i = 0; i < limit - held.length + 3; i++) flood.push(await open());
    let closed = 0;
    for (const socket of flood) socket.once('close', () => closed++).resume();
    await waitFor('a connection past the limit closed', () => closed > 0, 5000);
    await waitFor(
      'every descriptor number below the limit taken',
      () => descriptorNumbers(pid).length === limit,
      5000,
    );

    /** Creates `perWriter` plants over each writer at once, every one answered 200. */
    const createOverEach = async (perWriter: number) => {
      const statuses = await Promise.all(
        writers.map((writer, i) =>
          createOver(writer, service.token, ids(next + i * perWriter, perWriter)),
        ),
      );
      expect(statuses.flat().filter((status) => status !== 200)).toEqual([]);
      next += writers.length * perWriter;
    };

    // Past DEFAULT_CHECKPOINT_EVERY_WRITES the checkpoint thread would start, with a descriptor of
    // its own.
    await createOverEach(DEFAULT_CHECKPOINT_EVERY_WRITES / 2 + 1000);
    const linesSaying = (message: string) =>
      logLinesOf(service.server).filter((line) => line['message'] === message);
    await waitFor('the checkpoints handed back, logged', () => linesSaying(HANDED_BACK).length > 0);

    // With the flood gone, and its descriptors closed by the server, a new connection is accepted
    // and served. (One that came while the server still held them would be closed unserved.) The
    // limit goes back to what it was: descriptors are free again, as when a flood ends at the
    // process's own limit.
    for (const socket of flood) socket.destroy();
    await waitFor(
      "the flood's descriptors closed by the server",
      () => descriptorNumbers(pid).length <= held.length,
      5000,
    );
    limitOpenFiles(pid, soft, hard);
    const late = await open();
    expect(await createOver(late, service.token, ids(next++, 1))).toEqual([200]);
    const handedBack = async () =>
      seriesValue(
        await (await fetch(`${service.server.baseUrl}/metrics`)).text(),
        'sqlite_wal_checkpoints_handed_back',
      );
    expect(await handedBack()).toBe(1);

    // Tried again twice DEFAULT_CHECKPOINT_EVERY_WRITES writes after the hand-back (which came
    // before the last of the writes above), the thread starts, with descriptors free, and runs its
    // passes; the next commit after them ends the checkpoint, and the thread has it back. Each
    // writer sends DEFAULT_CHECKPOINT_EVERY_WRITES, twice that in all, then a few more until then.
    await createOverEach(DEFAULT_CHECKPOINT_EVERY_WRITES);
    const deadline = Date.now() + 60_000;
    while (linesSaying(TAKEN_BACK).length === 0) {
      if (Date.now() > deadline) throw new Error('the checkpoints taken back: not logged in 60 s');
      expect(await createOver(late, service.token, ids(next, 10))).toEqual(Array(10).fill(200));
      next += 10;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(await handedBack()).toBe(0);

    // A stop closes the store as usual: every answered write is in the file. Its log, read whole
    // once the process has exited, says once why checkpoints went back and once that they came
    // back, and had no accept to report.
    for (const socket of sockets) socket.destroy();
    expect(await service.server.stop()).toBe(0);
    expect(readSqlitePlantIds(service.sqlitePath)).toHaveLength(next - 1);
    expect(linesSaying(TAKEN_BACK)).toEqual([expect.objectContaining({ level: 30 })]);
    expect(linesSaying(HANDED_BACK)).toEqual([
      expect.objectContaining({
        level: 40,
        reason: expect.stringMatching(
          /^opening the database file for the checkpoint thread: EMFILE: too many open files/,
        ),
      }),
    ]);
    expect(logLinesOf(service.server).filter((line) => line['level'] === 50)).toEqual([]);
  }, 240_000);
});
