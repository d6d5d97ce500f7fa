/**
 * The load generator: one process (pinned by the caller to its own core) that runs autocannon
 * against a server for warm-up + duration seconds with unique ids, checks every status and prints
 * one JSON line (LoadResult) on stdout.
 */
import { performance } from 'node:perf_hooks';
import autocannon from 'autocannon';
import { createBody, createdIds, plantId } from './ids';
import type { LatencySummary, LoadEvent, LoadResult, LoadSpec } from './load-spec';

type Request = NonNullable<Parameters<typeof autocannon>[0]['requests']>[number];

const MAX_SAMPLES = 8;

/** One JSON line on stdout: the window's start and end as they happen (so the caller can sample the server then), then the result. */
function say(message: LoadEvent): void {
  process.stdout.write(`${JSON.stringify(message)}\n`);
}

class Samples {
  private values = new Float64Array(1 << 18);
  private length = 0;

  push(value: number): void {
    if (this.length === this.values.length) {
      const grown = new Float64Array(this.values.length * 2);
      grown.set(this.values);
      this.values = grown;
    }
    this.values[this.length++] = value;
  }

  /** Of the samples pushed from the `from`-th up to (without) the `to`-th: all of them by default. */
  summary(from = 0, to = this.length): LatencySummary {
    const sorted = this.values.slice(from, to).sort();
    const at = (p: number) =>
      sorted.length === 0
        ? 0
        : sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)]!;
    let sum = 0;
    for (const value of sorted) sum += value;
    return {
      p50: at(0.5),
      p90: at(0.9),
      p99: at(0.99),
      p999: at(0.999),
      max: sorted.length === 0 ? 0 : sorted[sorted.length - 1]!,
      mean: sorted.length === 0 ? 0 : sum / sorted.length,
    };
  }
}

/** The p99 of each second's answers, given how many each second had, in the order they came. */
function p99PerSecond(latencies: Samples, counts: readonly number[]): number[] {
  let from = 0;
  return counts.map((count) => {
    const p99 = latencies.summary(from, from + count).p99;
    from += count;
    return p99;
  });
}

async function run(spec: LoadSpec): Promise<LoadResult> {
  const nextCreatedId = createdIds(spec.idOrder);
  let deleteCounter = 0;
  let exhausted = 0;
  let postsSent = 0;
  let deletesSent = 0;
  let unexpected = 0;
  const unexpectedSamples: string[] = [];
  const statuses: Record<string, number> = {};

  const expect = (wanted: number, what: string) => (status: number, body: string) => {
    statuses[status] = (statuses[status] ?? 0) + 1;
    if (status === wanted) return;
    unexpected++;
    if (unexpectedSamples.length < MAX_SAMPLES) {
      unexpectedSamples.push(`${what}: ${status} ${body.slice(0, 200)}`);
    }
  };

  const post: Request = {
    method: 'POST',
    path: '/plants',
    headers: { 'content-type': 'application/json' },
    setupRequest: (request) => {
      postsSent++;
      request.body = createBody(nextCreatedId());
      return request;
    },
    onResponse: expect(200, 'POST /plants'),
  };
  const remove: Request = {
    method: 'DELETE',
    setupRequest: (request) => {
      if (deleteCounter >= spec.deletable) exhausted++;
      deletesSent++;
      request.path = `/plants/${plantId(deleteCounter++, spec.idOrder)}`;
      return request;
    },
    onResponse: expect(204, 'DELETE /plants/{id}'),
  };
  const requests =
    spec.workload === 'post' ? [post] : spec.workload === 'delete' ? [remove] : [post, remove];

  // In the order of their answers, so each second's are a run of them: perSecond counts each run.
  const latencies = new Samples();
  const start = performance.now();
  const windowStart = start + spec.warmupSeconds * 1000;
  const windowEnd = windowStart + spec.durationSeconds * 1000;
  const perSecond = new Array<number>(Math.ceil(spec.durationSeconds)).fill(0);
  let inWindow = 0;
  let cpuAtWindowStart = process.cpuUsage();
  let cpuInWindow: NodeJS.CpuUsage | undefined;
  const windowTimers = [
    setTimeout(() => {
      cpuAtWindowStart = process.cpuUsage();
      say({ event: 'window-start' });
    }, windowStart - start),
    setTimeout(() => {
      cpuInWindow = process.cpuUsage(cpuAtWindowStart);
      say({ event: 'window-end' });
    }, windowEnd - start),
  ];

  const instance = autocannon({
    url: spec.url,
    connections: spec.connections,
    // A little slack so that the window is whole, whatever autocannon's own start-up takes.
    duration: spec.warmupSeconds + spec.durationSeconds + 0.25,
    timeout: spec.timeoutSeconds,
    headers: { authorization: `Bearer ${spec.token}` },
    requests,
  });
  instance.on('response', (_client: unknown, _status: number, _bytes: number, ms: number) => {
    const now = performance.now();
    if (now < windowStart || now >= windowEnd) return;
    inWindow++;
    latencies.push(ms);
    const second = Math.floor((now - windowStart) / 1000);
    if (second < perSecond.length) perSecond[second]!++;
  });
  const result = await instance;
  for (const timer of windowTimers) clearTimeout(timer);
  cpuInWindow ??= process.cpuUsage(cpuAtWindowStart);
  const cpuMs = (cpuInWindow.user + cpuInWindow.system) / 1000;
  // A last second cut short by the window's end is left out.
  const wholeSeconds = perSecond.slice(0, Math.floor(spec.durationSeconds));

  return {
    requests: inWindow,
    requestsPerSecond: inWindow / spec.durationSeconds,
    latencyMs: latencies.summary(),
    perSecond: wholeSeconds,
    p99PerSecondMs: p99PerSecond(latencies, wholeSeconds),
    statuses,
    unexpected,
    unexpectedSamples,
    errors: result.errors,
    timeouts: result.timeouts,
    exhausted,
    postsSent,
    deletesSent,
    loaderCpuPercent: (100 * cpuMs) / (spec.durationSeconds * 1000),
  };
}

run(JSON.parse(process.argv[2] ?? '') as LoadSpec).then(
  (result) => say({ event: 'result', result }),
  (error: unknown) => {
    process.stderr.write(
      `load generator failed: ${error instanceof Error ? error.stack : String(error)}\n`,
    );
    process.exitCode = 1;
  },
);
