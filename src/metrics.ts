import type { RequestHandler } from 'express';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { FinishedRequest } from './http/request-log';
import type { ConnectionCounts } from './http/connections';
import type { CommitTotals, PlantStore } from './store/plant-store';
import { wrapStoreMethods } from './store/wrap-store';

export interface Metrics {
  /** Counts and times a finished request, labelled by operationId, method and status. */
  record(request: FinishedRequest): void;
  /** Counts an answer node:http's server wrote itself (see http/client-errors), by status and cause. */
  recordServerAnswer(status: number, cause: string | undefined): void;
  /** GET /metrics in the Prometheus text format. */
  readonly handler: RequestHandler;
  /**
   * The same store, timing every call, labelled by method and outcome; and, where the store
   * group-commits (SQLite), its commits' totals. Once per registry.
   */
  instrumentStore(store: PlantStore): PlantStore;
  /**
   * The HTTP server's connections, open and closed by it (see limitConnections), read at each
   * scrape. Once per registry.
   */
  watchConnections(counts: () => ConnectionCounts): void;
}

const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

/** A counter read off a running total at each scrape. */
function totalCounter(registry: Registry, name: string, help: string, read: () => number): void {
  new Counter({
    name,
    help,
    registers: [registry],
    collect() {
      this.reset();
      this.inc(read());
    },
  });
}

/** Counters read off the store's running totals at each scrape, so a commit only adds to numbers. */
function registerCommitTotals(registry: Registry, totals: CommitTotals): void {
  const counter = (name: string, help: string, read: () => number) =>
    totalCounter(registry, name, help, read);
  counter(
    'sqlite_group_commits_total',
    'Group commits of the SQLite store whose writes were answered (committed and, under FULL, synced).',
    () => totals.commits,
  );
  counter(
    'sqlite_group_commit_writes_total',
    'Writes in those commits; divided by sqlite_group_commits_total, the writes that share a commit.',
    () => totals.writes,
  );
  counter(
    'sqlite_wal_sync_seconds_total',
    "Time of those commits' WAL syncs under SQLITE_SYNCHRONOUS=FULL, from the commit to the sync's completion.",
    () => totals.syncSeconds,
  );
}

/**
 * Prometheus metrics in a registry of their own (no global state), process metrics included, and
 * the log lines the process dropped when given their running total.
 */
export function createMetrics(options: { droppedLogLines?: () => number } = {}): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  if (options.droppedLogLines !== undefined) {
    totalCounter(
      registry,
      'log_lines_dropped_total',
      'Log lines dropped because standard output had not taken the 16 MiB of lines before them.',
      options.droppedLogLines,
    );
  }
  const requests = new Counter({
    name: 'http_requests_total',
    help: 'HTTP requests answered, by contract operation, method and status.',
    labelNames: ['operation', 'method', 'status'] as const,
    registers: [registry],
  });
  const latency = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'Time from a request arriving to its response being written, by operation and status.',
    labelNames: ['operation', 'method', 'status'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  });
  const serverAnswers = new Counter({
    name: 'http_server_answers_total',
    help: "Answers the HTTP server wrote itself (400, 408, 431) to requests it could not read whole, and 405 to CONNECT, by status and Node's error code (or CONNECT).",
    labelNames: ['status', 'cause'] as const,
    registers: [registry],
  });
  const storeLatency = new Histogram({
    name: 'store_operation_duration_seconds',
    help: 'Time of one store call, by store method and outcome (ok or error).',
    labelNames: ['operation', 'outcome'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  });

  // One labelled child per series, made once rather than a label object and a child per request.
  // Bounded: operations, the methods Node accepts, and statuses are few.
  type Series = {
    counter: ReturnType<typeof requests.labels>;
    histogram: ReturnType<typeof latency.labels>;
  };
  const series = new Map<string, Series>();
  const seriesOf = (operation: string, method: string, status: number) => {
    const key = `${operation} ${method} ${status}`;
    let found = series.get(key);
    if (found === undefined) {
      const labels = { operation, method, status: String(status) };
      found = { counter: requests.labels(labels), histogram: latency.labels(labels) };
      series.set(key, found);
    }
    return found;
  };

  return {
    record({ method, operationId, status, seconds }) {
      // Unrouted requests share one label, so a scan of random paths cannot grow the series.
      const { counter, histogram } = seriesOf(operationId ?? 'none', method, status);
      counter.inc();
      histogram.observe(seconds);
    },
    recordServerAnswer(status, cause) {
      // Bounded: Node's parser error codes, its request time-out and CONNECT.
      serverAnswers.inc({ status: String(status), cause: cause ?? 'unknown' });
    },
    async handler(_req, res) {
      res.type(registry.contentType).send(await registry.metrics());
    },
    watchConnections(counts) {
      new Gauge({
        name: 'http_connections_open',
        help: 'HTTP connections open now (at most MAX_CONNECTIONS).',
        registers: [registry],
        collect() {
          this.set(counts().open);
        },
      });
      totalCounter(
        registry,
        'http_connections_dropped_total',
        'HTTP connections closed as they arrived because MAX_CONNECTIONS connections were open.',
        () => counts().dropped,
      );
      totalCounter(
        registry,
        'http_connections_timed_out_total',
        'HTTP connections closed because nothing was read or written for INACTIVITY_TIMEOUT_MS while a request was in progress.',
        () => counts().timedOut,
      );
    },
    instrumentStore(store) {
      if (store.commitTotals !== undefined) registerCommitTotals(registry, store.commitTotals);
      const checkpoints = store.walCheckpoints;
      if (checkpoints !== undefined) {
        new Gauge({
          name: 'sqlite_wal_checkpoints_handed_back',
          help: "1 while the SQLite store's checkpoint thread has failed or could not start and, tried again, has not yet seen a checkpoint through: SQLite checkpoints the WAL inside commits, on the event loop (see the log's warnings for why).",
          registers: [registry],
          collect() {
            this.set(checkpoints.handedBack() ? 1 : 0);
          },
        });
      }
      return wrapStoreMethods(store, (operation, method) => {
        const ok = storeLatency.labels({ operation, outcome: 'ok' });
        const failed = storeLatency.labels({ operation, outcome: 'error' });
        return (...args) => {
          const started = performance.now();
          return method(...args).then(
            (result) => {
              ok.observe((performance.now() - started) / 1000);
              return result;
            },
            (error: unknown) => {
              failed.observe((performance.now() - started) / 1000);
              throw error;
            },
          );
        };
      });
    },
  };
}
