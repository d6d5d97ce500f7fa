import type { IdOrder } from './ids';

/** What the service (or a bare server) is asked to do in one measurement. */
export type Workload = 'post' | 'delete' | 'mix';

/** The load generator's instructions, passed as JSON in its one argument. */
export interface LoadSpec {
  /** The server's base URL, e.g. http://127.0.0.1:40123 */
  readonly url: string;
  readonly workload: Workload;
  /** Bearer token; bare servers ignore it but receive the same request bytes. */
  readonly token: string;
  readonly connections: number;
  /** Responses before this point are checked but not measured. */
  readonly warmupSeconds: number;
  readonly durationSeconds: number;
  readonly idOrder: IdOrder;
  /** DELETE takes prefilled ids of counters [0, deletable), in order. */
  readonly deletable: number;
  /** Seconds without an answer before autocannon counts a timeout. */
  readonly timeoutSeconds: number;
}

export interface LatencySummary {
  readonly p50: number;
  readonly p90: number;
  readonly p99: number;
  readonly p999: number;
  readonly max: number;
  readonly mean: number;
}

/** What the load generator prints, as one JSON line, when it is done. */
export interface LoadResult {
  /** Responses completed inside the measurement window. */
  readonly requests: number;
  readonly requestsPerSecond: number;
  /** Milliseconds, from writing the request to reading the whole response, inside the window. */
  readonly latencyMs: LatencySummary;
  /** Requests per second in each whole second of the window: shows stalls. */
  readonly perSecond: readonly number[];
  /** The p99 latency of each of those seconds, in milliseconds. */
  readonly p99PerSecondMs: readonly number[];
  /** Every status seen during the whole run (warm-up included). */
  readonly statuses: Readonly<Record<string, number>>;
  /** Responses whose status was not the one expected (200 create, 204 delete), whole run. */
  readonly unexpected: number;
  readonly unexpectedSamples: readonly string[];
  /** Connection errors and timeouts (autocannon counts a timeout as an error too). */
  readonly errors: number;
  readonly timeouts: number;
  /** DELETE requests sent after the prefilled ids ran out (each is a benchmark bug: a 404). */
  readonly exhausted: number;
  readonly postsSent: number;
  readonly deletesSent: number;
  /** CPU time of the load generator over the window, in % of one core: near 100 means it was the limit. */
  readonly loaderCpuPercent: number;
}

/** The load generator's stdout, one JSON object a line. */
export type LoadEvent =
  | { readonly event: 'window-start' }
  | { readonly event: 'window-end' }
  | { readonly event: 'result'; readonly result: LoadResult };
