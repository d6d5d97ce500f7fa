import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { forwardingServer } from './tcp-proxy';

/**
 * A PostgreSQL server as a client finds it over a Unix socket: `<dir>/.s.PGSQL.<port>`, forwarding
 * to a real server on 127.0.0.1. Stopped, the socket file is gone, as when PostgreSQL is down.
 */
export interface UnixSocketProxy {
  /** The directory to name as the URL's `host`. */
  readonly dir: string;
  /** The port in the socket file's name, to name as the URL's `port`. */
  readonly port: number;
  /** Closes every connection and removes the socket file. */
  stop(): Promise<void>;
  /** Listens again, at the same path. */
  start(): Promise<void>;
  /** Stops, and removes the directory. */
  close(): Promise<void>;
}

/** Starts forwarding a socket file in a new temporary directory to `targetPort` on 127.0.0.1. */
export async function startUnixSocketProxy(
  targetPort: number,
  port = 5432,
): Promise<UnixSocketProxy> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'plant-store-pg-socket-'));
  const socketPath = path.join(dir, `.s.PGSQL.${port}`);
  const { server, dropAll } = forwardingServer(targetPort);
  const start = () =>
    new Promise<void>((resolve, reject) => {
      if (server.listening) return resolve();
      server.once('error', reject).listen(socketPath, () => {
        server.off('error', reject);
        resolve();
      });
    });
  const stop = () =>
    new Promise<void>((resolve) => {
      dropAll();
      if (!server.listening) return resolve();
      // Node removes the socket file when the server closes.
      server.close(() => resolve());
    });
  await start();
  return {
    dir,
    port,
    start,
    stop,
    async close() {
      await stop();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
