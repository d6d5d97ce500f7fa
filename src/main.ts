import cluster from 'node:cluster';
import net, { type AddressInfo } from 'node:net';
import path from 'node:path';
import pino from 'pino';
import { createApp } from './app';
import { onStopLeavingStore, reportStoreStopped, supervise } from './cluster';
import { ConfigError, parseConfig, type Config } from './config';
import { endProcess } from './process-end';
import { connectionCounts } from './http/connections';
import { loadOpenApiDocument } from './http/openapi-document';
import { flushRequestLines, PIPE_BUF } from './http/request-log';
import { boundLineWrites, createLogger, flushUntilIdle, type Logger } from './logger';
import { createMetrics } from './metrics';
import { closeGracefully, createHttpServer } from './server';
import { createPlantsService } from './service/plants-service';
import { createTokensService, failureText } from './service/tokens-service';
import { openStore, type StoreEvents } from './store/open-store';
import type { PlantStore } from './store/plant-store';

/** The contract ships at the project root, two levels above dist/src/. */
const SPEC_PATH = path.resolve(__dirname, '..', '..', 'openapi.yaml');
/** Written by `npm run build` (scripts/build-contract-cache.ts). */
const CONTRACT_CACHE_PATH = path.resolve(__dirname, '..', 'contract-cache.json');

/** A worker stops only when the primary says so, not on the terminal's Ctrl-C sent to the whole group. */
const STOP_SIGNALS: readonly NodeJS.Signals[] = cluster.isWorker
  ? ['SIGTERM']
  : ['SIGTERM', 'SIGINT'];

function urlOf(host: string, port: number): string {
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
}

/**
 * A port free on `host` at this moment: PORT=0 under WORKERS is resolved once, in the primary, so
 * that every worker listens on the same port, replacements included (see supervise). Should another
 * process take it before the first worker listens, the start fails as with any port in use.
 */
function freePort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once('error', reject);
    probe.listen(0, host, () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}

/**
 * Calls `stop` on the first stop signal, and keeps taking the later ones without effect: a process
 * that is draining must not die of a second SIGTERM, as a worker would when a supervisor signals
 * the whole process group (systemd's default) and the primary then signals its workers again.
 */
function onStopSignal(stop: (signal: string) => void): void {
  let stopping = false;
  const first = (signal: string) => {
    if (stopping) return;
    stopping = true;
    stop(signal);
  };
  for (const signal of STOP_SIGNALS) process.on(signal, first);
  if (cluster.isWorker) process.on('SIGINT', () => undefined);
}

/**
 * Whether this start is to create the development token: the store has no active token, outside
 * production. Production refuses to start instead.
 */
async function needsDevelopmentToken(store: PlantStore, config: Config): Promise<boolean> {
  if ((await createTokensService({ store }).countActive()) > 0) return false;
  if (!config.production) return true;
  // Thrown, so that it reaches stderr as every failed start does: a log line at LOG_LEVEL=silent
  // would leave the operator with an exit code and no word.
  throw new Error(
    'No API token exists, so no request could be served. Create one with `npm run token -- create --name NAME` and start again.',
  );
}

/**
 * Bytes of log lines standard output may have waiting before further lines are dropped: when
 * nothing reads it (a log shipper that hangs), the lines would otherwise be held without bound.
 */
const STDOUT_HELD_BYTES = 16 * 1024 * 1024;

/**
 * Whether other processes write to this standard output too: the primary and each worker under
 * WORKERS (any value but 1; one that is not valid stops the start anyway) share the descriptor.
 */
const SHARED_STDOUT = cluster.isWorker || (process.env['WORKERS'] ?? '1') !== '1';

/**
 * Standard output, written asynchronously so that logging never blocks a request. Lines are
 * written in batches of 8 KiB, or every 100 ms if fewer arrive: a write per line (on libuv's thread
 * pool) was a tenth of a request's CPU under load (README, "Operating it"). Start-up lines are
 * flushed at once, and everything is flushed before the process exits; a process killed outright
 * loses at most the last 100 ms of lines. When other processes share it (WORKERS), each write is
 * of whole lines and at most PIPE_BUF bytes, which a pipe (a container's standard output) takes
 * whole: larger, a write to a full pipe went in parts, another process's lines between them, and
 * the log shipper got lines cut in two. sonic-boom puts each string it is given whole into one
 * write, with others only up to maxWrite (the request lines of one turn come in pieces of at most
 * PIPE_BUF: request-log.ts); a single line longer than PIPE_BUF (a request line with a path of
 * kilobytes, an error's stack) has its longest strings cut to fit, and says so (boundLineWrites).
 * A write starts once nearly PIPE_BUF bytes wait (minLength must be below maxWrite).
 */
const stdout = pino.destination({
  dest: 1,
  sync: false,
  minLength: SHARED_STDOUT ? PIPE_BUF - 1 : 8192,
  ...(SHARED_STDOUT ? { maxWrite: PIPE_BUF } : {}),
  periodicFlush: 100,
  maxLength: STDOUT_HELD_BYTES,
});
if (SHARED_STDOUT) boundLineWrites(stdout, PIPE_BUF);
/** Log lines dropped because standard output had not taken STDOUT_HELD_BYTES waiting before them. */
let droppedLogLines = 0;
stdout.on('drop', (data: string | Buffer) => {
  for (let at = data.indexOf('\n'); at !== -1; at = data.indexOf('\n', at + 1)) droppedLogLines++;
});

/**
 * A write to standard output that fails (a full disk under a redirected log: ENOSPC, EDQUOT, EIO)
 * must not stop the service: pino's own listener handles only EPIPE and emits any other error
 * again, which with no listener ended the process at once, undrained. The lines wait, and past
 * STDOUT_HELD_BYTES are dropped (and counted), while the writes are retried; stderr says so once
 * a spell, and again when a write succeeds.
 */
let stdoutFailing = false;
stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (stdoutFailing) return;
  stdoutFailing = true;
  process.stderr.write(
    `Writing the log to standard output failed (${error.code ?? error.message}): its lines ` +
      `wait, and are dropped past ${STDOUT_HELD_BYTES / 2 ** 20} MiB, until a write succeeds.\n`,
  );
});
stdout.on('write', () => {
  if (!stdoutFailing) return;
  stdoutFailing = false;
  process.stderr.write('Writing the log to standard output succeeds again.\n');
});

/**
 * Creates the development token and prints it. Only once the port is bound: created before, a
 * start that then failed (a host name that does not resolve, a port in use) left an active token
 * that nobody was shown, and the next start, finding one, printed none.
 */
async function announceDevelopmentToken(store: PlantStore, url: string): Promise<void> {
  printDevelopmentToken((await createTokensService({ store }).issue('development')).secret, url);
}

function printDevelopmentToken(secret: string, url: string): void {
  // Through the same stream as the log, so it cannot overtake or be overtaken by a log line.
  stdout.write(
    [
      '',
      `Created a development token (shown once, stored only as a hash): ${secret}`,
      'Try it:',
      `  curl -i -X POST ${url}/plants -H 'Authorization: Bearer ${secret}' \\`,
      `    -H 'Content-Type: application/json' -d '{"id": 1, "name": "Monstera deliciosa", "tag": "tropical"}'`,
      '',
    ].join('\n') + '\n',
  );
}

/** A failed start, in plain text on stderr whatever LOG_LEVEL is. */
function reportStartFailure(error: unknown): void {
  // A development token in doubt is named: a start makes one only while no token is active.
  process.stderr.write(`The plant store failed to start: ${failureText(error)}\n`);
}

/**
 * Serves requests from this process until a stop signal; resolves with the exit code. Once the
 * port is bound, `onListening` runs before "listening" is logged; if it fails, the process stops
 * with exit code 1.
 */
function serve(
  config: Config,
  openedStore: PlantStore,
  logger: Logger,
  onListening: (url: string) => Promise<void>,
): Promise<number> {
  const metrics = config.metrics
    ? createMetrics({ droppedLogLines: () => droppedLogLines })
    : undefined;
  const store = metrics?.instrumentStore(openedStore) ?? openedStore;
  servedStore = store;
  let shuttingDown = false;
  const app = createApp({
    document: loadOpenApiDocument(SPEC_PATH, CONTRACT_CACHE_PATH),
    plants: createPlantsService({ store }),
    tokens: createTokensService({ store }),
    readiness: { checkStore: () => store.ping(), isShuttingDown: () => shuttingDown },
    logger,
    bodyLimitBytes: config.bodyLimitBytes,
    validateResponses: config.validateResponses,
    metrics,
    corsOrigins: config.corsOrigins,
    trustProxyHops: config.trustProxyHops,
    limits: config.limits,
  });
  const server = createHttpServer(app, config.http, logger, metrics?.recordServerAnswer);
  metrics?.watchConnections(() => connectionCounts(server));
  return new Promise<number>((resolve, reject) => {
    let exitCode = 0;
    /** Whether to exit without closing the store (onStopLeavingStore), read once drained. */
    let leaveStore = false;
    const stop = (code: number) => {
      // A store that stops during a signal's drain still makes the exit a failure.
      exitCode = Math.max(exitCode, code);
      if (shuttingDown) return;
      shuttingDown = true;
      closeGracefully(server, config.http.shutdownTimeoutMs)
        .then(() => (leaveStore ? undefined : store.close()))
        // The lines of the requests that finished during the drain come before the last one.
        .finally(flushRequestLines)
        .then(
          () => {
            logger.info('stopped');
            resolve(exitCode);
          },
          (error: unknown) => {
            logger.error({ err: error }, 'closing the store failed');
            resolve(1);
          },
        );
    };
    // Installed before the port is bound, so a signal at any moment after start stops cleanly.
    onStopSignal((signal) => {
      logger.info({ signal }, 'stopping: draining in-flight requests');
      stop(0);
    });
    // A store that can no longer write safely answers every write 503 until the process is restarted
    // by its supervisor: stop, as after a signal, and exit with 1; under WORKERS the primary then
    // stops every worker, and exits with 1 too (see supervise).
    void store.stopped?.then((reason) => {
      logger.fatal({ err: reason }, 'the store can no longer write safely: stopping');
      reportStoreStopped();
      stop(1);
    });
    onStopLeavingStore(() => {
      logger.fatal("another worker's store can no longer write safely: stopping");
      leaveStore = true;
      stop(1);
    });
    server.once('error', reject).listen(config.port, config.host, () => {
      // Once listening, an error of the listening socket is one accept that failed (out of
      // descriptors or memory): node:net goes on accepting, so the service logs it and serves on.
      server.off('error', reject).on('error', (error) => {
        logger.error({ err: error }, 'accepting a connection failed');
      });
      const url = urlOf(config.host, (server.address() as AddressInfo).port);
      onListening(url).then(
        () => {
          // Under cluster the primary says "listening" once, after the first worker is.
          const message = cluster.isWorker ? 'worker listening' : 'listening';
          logger.info({ url, store: config.store.kind }, message);
          stdout.flush();
        },
        (error: unknown) => {
          reportStartFailure(error);
          stop(1);
        },
      );
    });
  });
}

async function main(): Promise<number> {
  let config: Config;
  try {
    config = parseConfig(process.env);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    process.stderr.write(`${error.message}\n`);
    return 1;
  }
  const { level, format } = config.log;
  const pretty =
    format === 'pretty' ||
    (format === 'auto' && !config.production && process.stdout.isTTY === true);
  const logger = createLogger({ level, pretty, destination: stdout });
  const storeEvents: StoreEvents = {
    // Not a failure of the store: the next statement gets a new connection, or a 503 if none comes.
    onIdleConnectionLost: (error) =>
      logger.warn({ err: error }, 'database connection lost while idle'),
    // Writes go on, each as durable as before; only the checkpoints' cost moves into the commits.
    onCheckpointsHandedBack: (reason) =>
      logger.warn({ reason }, 'WAL checkpoints handed back to SQLite, on the event loop'),
    onCheckpointsTakenBack: () =>
      logger.info('WAL checkpoints taken back by the checkpoint thread, off the event loop'),
  };
  if (cluster.isWorker) {
    const store = await openStore(config.store, storeEvents);
    return serve(config, store, logger, () => Promise.resolve());
  }

  const sharedPort =
    config.workers > 1 && config.port === 0 ? await freePort(config.host) : config.port;
  const store = await openStore(config.store, { first: true, ...storeEvents });
  // Under WORKERS the primary keeps it only to create the development token, whose sync may stick.
  servedStore = store;
  const needsToken = await needsDevelopmentToken(store, config).catch(async (error: unknown) => {
    await store.close();
    throw error;
  });
  const announce = (url: string) =>
    needsToken ? announceDevelopmentToken(store, url) : Promise.resolve();
  if (config.workers === 1) return serve(config, store, logger, announce);
  // The primary serves nothing: it keeps the store only to create the development token.
  if (!needsToken) await store.close();
  const code = await supervise({ workers: config.workers, port: sharedPort }, logger, {
    async onFirstListening(port) {
      const url = urlOf(config.host, port);
      try {
        await announce(url);
      } catch (error) {
        reportStartFailure(error);
        throw error;
      } finally {
        await store.close();
      }
      logger.info({ url, store: config.store.kind, workers: config.workers }, 'listening');
      stdout.flush();
    },
    onStopSignal,
  });
  // Closing a closed store resolves: here it is still open when no worker ever listened.
  await store.close();
  return code;
}

/** The store this process opened to serve from, looked at on the way out (see exit). */
let servedStore: PlantStore | undefined;

/** How long the exit waits, at most, for held-back log lines to reach a standard output that does not drain. */
const EXIT_FLUSH_TIMEOUT_MS = 5_000;

/**
 * Writes out every log line still held back, then ends the process. Asynchronously: pino's
 * flushSync, which its own exit hook would run, retries a failed write for ever, so a standard
 * output that nobody reads any more (the reader of its pipe has exited: EPIPE) or that does not
 * drain would hold the process after its port and store were closed. Flushes until two flushes
 * in a row write nothing (flushUntilIdle), and ends at once on EPIPE; after EXIT_FLUSH_TIMEOUT_MS,
 * what is still held back is dropped (destroy() also turns pino's exit hook off).
 */
function exit(code: number): void {
  flushRequestLines();
  const end = () => {
    stdout.destroy();
    endProcess(code, servedStore);
  };
  setTimeout(end, EXIT_FLUSH_TIMEOUT_MS);
  flushUntilIdle(stdout, end);
}

main().then(exit, (error: unknown) => {
  reportStartFailure(error);
  exit(1);
});
