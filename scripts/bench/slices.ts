/**
 * Two running services, A and B, under equal POST load in slices, for ratios that a machine's
 * drift does not move: either both at once on one shared core (exact about CPU, blind to waits
 * for the disk), or one at a time, A B, then B A, and so on (`alternate`: what a server waits for
 * counts, and drifts slower than a slice cancel). Used by `bench:compare` and by `npm run bench`
 * for SQLite FULL ÷ NORMAL.
 */
import autocannon from 'autocannon';
import { createBody, createdIds } from './ids';
import { cpuMsOf } from './proc';

/** A service to load: its address, a valid token, and its process for the CPU it uses. */
export interface SliceTarget {
  readonly url: string;
  readonly token: string;
  readonly pid: number;
}

/** One slice: requests each server answered, its CPU µs per request and its p99 latency in ms, A first. */
export interface Slice {
  readonly requests: readonly [number, number];
  readonly cpuUsPerRequest: readonly [number, number];
  readonly p99Ms: readonly [number, number];
}

/** A ratio's geometric mean over the slices, and two standard errors either side of it. */
export interface RatioEstimate {
  readonly mean: number;
  readonly low: number;
  readonly high: number;
}

/** The slices' B ÷ A, of requests and of CPU per request, with their estimates. */
export interface SliceResults {
  readonly slices: readonly Slice[];
  /** B's requests ÷ A's, slice by slice. */
  readonly requestRatios: readonly number[];
  /** B's CPU per request ÷ A's, slice by slice. */
  readonly cpuRatios: readonly number[];
  /** B's p99 latency ÷ A's, slice by slice. */
  readonly p99Ratios: readonly number[];
  readonly requests: RatioEstimate;
  readonly cpuPerRequest: RatioEstimate;
  readonly p99: RatioEstimate;
}

/**
 * The geometric mean of ratios, and the range of two standard errors around it on the log scale
 * (so 1/x is the mirror of x): about 95% of such runs would land their mean there.
 */
export function estimate(ratios: readonly number[]): RatioEstimate {
  const logs = ratios.map(Math.log);
  const mean = logs.reduce((sum, value) => sum + value, 0) / logs.length;
  const variance =
    logs.length < 2
      ? 0
      : logs.reduce((sum, value) => sum + (value - mean) ** 2, 0) / (logs.length - 1);
  const spread = 2 * Math.sqrt(variance / logs.length);
  return { mean: Math.exp(mean), low: Math.exp(mean - spread), high: Math.exp(mean + spread) };
}

export function describeEstimate(ratio: RatioEstimate, digits = 3): string {
  return `${ratio.mean.toFixed(digits)} (two standard errors: ${ratio.low.toFixed(digits)} to ${ratio.high.toFixed(digits)})`;
}

/** Runs 2 s of warm-up on each, then `slices` measured slices of `seconds` per server. */
export async function runSlices(options: {
  readonly targets: readonly [SliceTarget, SliceTarget];
  readonly alternate: boolean;
  readonly slices: number;
  readonly seconds: number;
  readonly connections: number;
  /** Requests each connection sends before it waits for an answer (default 1: none pipelined). */
  readonly pipelining?: number;
  readonly onSlice?: (slice: Slice, index: number) => void;
}): Promise<SliceResults> {
  const { targets, alternate, seconds, connections, pipelining = 1 } = options;
  const nextCreatedId = createdIds('scattered');
  const load = (target: SliceTarget, duration: number) =>
    autocannon({
      url: target.url,
      connections,
      pipelining,
      duration,
      headers: { authorization: `Bearer ${target.token}` },
      requests: [
        {
          method: 'POST',
          path: '/plants',
          headers: { 'content-type': 'application/json' },
          setupRequest: (request) => ({
            ...request,
            body: createBody(nextCreatedId()),
          }),
        },
      ],
    });
  /** Loads target `i` for one slice: the requests it answered, its CPU µs per request and its p99. */
  const measureOne = async (i: 0 | 1) => {
    const target = targets[i];
    const before = cpuMsOf(target.pid);
    const result = await load(target, seconds);
    const bad = result.non2xx + result.errors;
    if (bad > 0) throw new Error(`${bad} answers of ${'AB'[i]} were not 200`);
    const total = result.requests.total;
    return {
      total,
      cpuUs: ((cpuMsOf(target.pid) - before) * 1000) / total,
      p99Ms: result.latency.p99,
    };
  };
  if (alternate) for (const target of targets) await load(target, 2);
  else await Promise.all(targets.map((target) => load(target, 2)));
  const slices: Slice[] = [];
  for (let index = 0; index < options.slices; index++) {
    // Alternating, B goes second in even slices and first in odd ones: a drift within a pair cancels over two.
    const order: [0 | 1, 0 | 1] = index % 2 === 0 ? [0, 1] : [1, 0];
    const [first, second] = alternate
      ? [await measureOne(order[0]), await measureOne(order[1])]
      : await Promise.all(order.map(measureOne));
    const [a, b] = order[0] === 0 ? [first!, second!] : [second!, first!];
    const slice: Slice = {
      requests: [a.total, b.total],
      cpuUsPerRequest: [a.cpuUs, b.cpuUs],
      p99Ms: [a.p99Ms, b.p99Ms],
    };
    slices.push(slice);
    options.onSlice?.(slice, index);
  }
  /** B's value ÷ A's of one measure, slice by slice. */
  const bOverA = (measure: (slice: Slice) => readonly [number, number]) =>
    slices.map((slice) => {
      const [a, b] = measure(slice);
      return b / a;
    });
  const requestRatios = bOverA((slice) => slice.requests);
  const cpuRatios = bOverA((slice) => slice.cpuUsPerRequest);
  const p99Ratios = bOverA((slice) => slice.p99Ms);
  return {
    slices,
    requestRatios,
    cpuRatios,
    p99Ratios,
    requests: estimate(requestRatios),
    cpuPerRequest: estimate(cpuRatios),
    p99: estimate(p99Ratios),
  };
}
