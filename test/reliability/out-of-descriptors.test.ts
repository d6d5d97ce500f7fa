import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import type net from 'node:net';
import { DEFAULT_CHECKPOINT_EVERY_WRITES } from '../../src/store/sqlite/wal-checkpoints';
import { logLinesOf, waitFor } from '../support/log-lines';
import { cleanupChildren } from '../support/server-process';
import { readSqlitePlantIds } from '../support/stored-plants';
import { bearer, connect } from './support/http';
import { parseResponse } from './support/raw';
import { startService, type Service } from './support/service';

/**
 * The server process out of file descriptors (its limit lowered to what it holds, as a flood of
 * connections leaves it): connections it cannot accept are closed at once, writes over the
 * connections it holds go on being stored, and the WAL's checkpoints, whose thread needs a
 * descriptor of its own, go back to SQLite's, which the log says once.
 */

/** Requests a connection has in flight at a time, written together (pipelined). */
const IN_FLIGHT = 200;

/** The descriptors `pid` holds now, by number (Linux: /proc). */
function descriptorNumbers(pid: number): number[] {
  return fs.readdirSync(`/proc/${pid}/fd`).map(Number);
}

/** Lowers the limit on open files of a running process: no descriptor of `limit` or over opens. */
function limitOpenFiles(pid: number, limit: number): void {
  execFileSync('prlimit', ['--pid', String(pid), `--nofile=${limit}:${limit}`]);
}

/**
 * Creates the plants of `ids` over one open connection, IN_FLIGHT requests pipelined at a time,
 * and resolves with the status of each answer, in order; rejects if the connection closes first.
 */
function createOver(socket: net.Socket, token: string, ids: readonly bigint[]): Promise<number[]> {
  const head = `POST /plants HTTP/1.1\r\nHost: localhost\r\nAuthorization: ${bearer(token)['Authorization']}\r\nContent-Type: application/json\r\n`;
  const request = (id: bigint) => {
    const body = `{"id":${id},"name":"plant ${id}"}`;
    return `${head}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
  };
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
    const onClose = () => fail(new Error(`closed after ${statuses.length} answers`));
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

/** Resolves with whether the server closed `socket` within `ms`. */
function closedWithin(socket: net.Socket, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    socket.once('close', () => {
      clearTimeout(timer);
      resolve(true);
    });
    socket.on('error', () => undefined);
    socket.resume();
  });
}

describe('a server out of file descriptors', () => {
  let service: Service;
  const sockets: net.Socket[] = [];
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

  it('closes the connections it cannot accept, goes on storing writes over those it holds, and says once that SQLite checkpoints the WAL', async () => {
    const pid = service.server.process.pid!;
    const writers = await Promise.all([connect(service.target), connect(service.target)]);
    sockets.push(...writers);
    // A first create on each: the server has accepted both, and holds a descriptor for each.
    let next = 1;
    for (const writer of writers) {
      expect(await createOver(writer, service.token, ids(next++, 1))).toEqual([200]);
    }
    const held = descriptorNumbers(pid);
    const limit = Math.max(...held) + 1;
    limitOpenFiles(pid, limit);

    // Free numbers below the limit are taken first; the connections past them cannot be accepted,
    // and node:net closes them at once (it keeps a descriptor in reserve for that).
    const free = limit - held.length;
    const flood: net.Socket[] = [];
    for (let i = 0; i < free + 3; i++) flood.push(await connect(service.target));
    sockets.push(...flood);
    const closed = await Promise.all(flood.map((socket) => closedWithin(socket, 2000)));
    // At least one (a descriptor of the server may have closed meanwhile, making room for one).
    expect(closed.filter(Boolean).length).toBeGreaterThanOrEqual(1);
    expect(descriptorNumbers(pid).every((fd) => fd < limit)).toBe(true);

    // Past DEFAULT_CHECKPOINT_EVERY_WRITES the checkpoint thread would start, with a descriptor of
    // its own.
    const half = DEFAULT_CHECKPOINT_EVERY_WRITES / 2 + 1000;
    const statuses = await Promise.all(
      writers.map((writer, i) => createOver(writer, service.token, ids(next + i * half, half))),
    );
    expect(statuses.flat().filter((status) => status !== 200)).toEqual([]);
    const stored = next - 1 + 2 * half;

    const warnings = () =>
      logLinesOf(service.server).filter((line) => line['message'] === HANDED_BACK);
    await waitFor('the checkpoints handed back, logged', () => warnings().length > 0);
    expect(warnings()).toEqual([
      expect.objectContaining({
        level: 40,
        reason: expect.stringMatching(
          /^opening the database file for the checkpoint thread: EMFILE: too many open files/,
        ),
      }),
    ]);

    // A stop closes the store as usual: every answered write is in the file.
    for (const socket of sockets) socket.destroy();
    expect(await service.server.stop()).toBe(0);
    expect(readSqlitePlantIds(service.sqlitePath)).toHaveLength(stored);
  }, 120_000);
});
