/**
 * Loaded with `node -r` into the service for the profiling run only (never into the measured
 * rounds): it measures event-loop delay, event-loop utilisation and GC pauses inside a window that
 * the benchmark opens and closes with SIGUSR2, and writes them as JSON to BENCH_PROBE_OUT at exit.
 * The service's own code is untouched.
 */
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { monitorEventLoopDelay, performance, PerformanceObserver } from 'node:perf_hooks';
import type { EventLoopUtilization } from 'node:perf_hooks';

export interface GcStats {
  count: number;
  totalMs: number;
  maxMs: number;
  /** Per kind (minor = scavenge, major = mark-compact, incremental, weakcb): count and milliseconds. */
  byKind: Record<string, { count: number; totalMs: number; maxMs: number }>;
}

/** How long better-sqlite3's synchronous calls held the event loop, per SQL statement. */
export interface StatementTimes {
  sql: string;
  method: string;
  count: number;
  totalMs: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** Calls that took longer than 5 ms and 20 ms: event-loop stalls. */
  over5Ms: number;
  over20Ms: number;
}

export interface ProbeReport {
  /** process.hrtime.bigint() in microseconds at the window's start and end: the CPU profile's clock. */
  windowStartUs: number;
  windowEndUs: number;
  eventLoopDelayMs: {
    min: number;
    mean: number;
    p50: number;
    p90: number;
    p99: number;
    max: number;
  };
  eventLoopUtilization: number;
  gc: GcStats;
  statements: StatementTimes[];
  /** process.memoryUsage() in MB (10^6 bytes): the highest of each over the window (sampled every 100 ms), and at its end. */
  memoryMB: { peak: Record<string, number>; atEnd: Record<string, number> };
}

const GC_KINDS: Record<number, string> = { 1: 'minor', 2: 'major', 4: 'incremental', 8: 'weakcb' };

const out = process.env['BENCH_PROBE_OUT'];
if (out !== undefined) {
  const delay = monitorEventLoopDelay({ resolution: 1 });
  delay.enable();
  const emptyGc = (): GcStats => ({ count: 0, totalMs: 0, maxMs: 0, byKind: {} });
  let gc = emptyGc();
  let windowStartUs = 0;
  let windowEndUs = 0;
  let eluStart: EventLoopUtilization = performance.eventLoopUtilization();
  let elu: EventLoopUtilization | undefined;
  let open = false;
  const nowUs = () => Number(process.hrtime.bigint() / 1000n);

  new PerformanceObserver((list) => {
    if (!open) return;
    for (const entry of list.getEntries()) {
      const { detail } = entry as { detail?: { kind?: number } };
      const kind = GC_KINDS[detail?.kind ?? 0] ?? 'other';
      const stats = (gc.byKind[kind] ??= { count: 0, totalMs: 0, maxMs: 0 });
      for (const target of [gc, stats]) {
        target.count++;
        target.totalMs += entry.duration;
        target.maxMs = Math.max(target.maxMs, entry.duration);
      }
    }
  }).observe({ entryTypes: ['gc'] });

  // better-sqlite3 runs each statement synchronously on the main thread: time every call.
  let calls = new Map<string, number[]>();
  const timed = (method: string, original: (...args: unknown[]) => unknown) =>
    function (this: { source: string }, ...args: unknown[]): unknown {
      const started = process.hrtime.bigint();
      try {
        return original.apply(this, args);
      } finally {
        if (open) {
          const key = `${method} ${this.source}`;
          let list = calls.get(key);
          if (list === undefined) calls.set(key, (list = []));
          list.push(Number(process.hrtime.bigint() - started) / 1e6);
        }
      }
    };
  try {
    const requireFromService = createRequire(path.join(process.cwd(), 'package.json'));
    const Database = requireFromService('better-sqlite3') as {
      prototype: { prepare: (...args: unknown[]) => object };
    };
    const prepare = Database.prototype.prepare;
    let patched = false;
    Database.prototype.prepare = function (this: unknown, ...args: unknown[]) {
      const statement = prepare.apply(this, args);
      if (!patched) {
        patched = true;
        const proto = Object.getPrototypeOf(statement) as Record<
          string,
          (...a: unknown[]) => unknown
        >;
        for (const method of ['run', 'get', 'all']) proto[method] = timed(method, proto[method]!);
      }
      return statement;
    };
  } catch {
    // No better-sqlite3 where the service runs: nothing to time.
  }

  let peakMemory: Record<string, number> = {};
  let endMemory: Record<string, number> = {};
  const memoryNow = () =>
    Object.fromEntries(Object.entries(process.memoryUsage()).map(([k, v]) => [k, v / 1e6]));
  const sampleMemory = () => {
    for (const [key, value] of Object.entries(memoryNow())) {
      peakMemory[key] = Math.max(peakMemory[key] ?? 0, value);
    }
  };
  let memoryTimer: NodeJS.Timeout | undefined;

  process.on('SIGUSR2', () => {
    if (!open) {
      peakMemory = {};
      memoryTimer = setInterval(sampleMemory, 100);
      memoryTimer.unref();
      open = true;
      delay.reset();
      gc = emptyGc();
      calls = new Map();
      eluStart = performance.eventLoopUtilization();
      windowStartUs = nowUs();
    } else {
      clearInterval(memoryTimer);
      sampleMemory();
      endMemory = memoryNow();
      open = false;
      delay.disable();
      elu = performance.eventLoopUtilization(eluStart);
      windowEndUs = nowUs();
    }
  });

  process.on('exit', () => {
    const ms = (ns: number) => ns / 1e6;
    const report: ProbeReport = {
      windowStartUs,
      windowEndUs,
      eventLoopDelayMs: {
        min: ms(delay.min),
        mean: ms(delay.mean),
        p50: ms(delay.percentile(50)),
        p90: ms(delay.percentile(90)),
        p99: ms(delay.percentile(99)),
        max: ms(delay.max),
      },
      eventLoopUtilization: (elu ?? performance.eventLoopUtilization(eluStart)).utilization,
      gc,
      memoryMB: { peak: peakMemory, atEnd: endMemory },
      statements: [...calls].map(([key, times]) => {
        const sorted = Float64Array.from(times).sort();
        const at = (p: number) =>
          sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)] ?? 0;
        const [method = '', ...sql] = key.split(' ');
        return {
          sql: sql.join(' '),
          method,
          count: sorted.length,
          totalMs: sorted.reduce((sum, value) => sum + value, 0),
          p50Ms: at(0.5),
          p99Ms: at(0.99),
          maxMs: sorted[sorted.length - 1] ?? 0,
          over5Ms: sorted.filter((value) => value > 5).length,
          over20Ms: sorted.filter((value) => value > 20).length,
        };
      }),
    };
    fs.writeFileSync(out, JSON.stringify(report));
  });
}
