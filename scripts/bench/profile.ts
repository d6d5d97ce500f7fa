/**
 * The profiling run: the service under POST load with `node --cpu-prof` and the probe preloaded
 * (event-loop delay, GC), then where the main thread's time went inside the measurement window.
 */
import fs from 'node:fs';
import path from 'node:path';
import { analyseCpuProfile, type ProfileBreakdown } from './cpu-profile';
import { measureCell, type Context } from './harness';
import type { ProbeReport } from './probe';
import type { StoreName } from './stores';

const f1 = (value: number) => value.toFixed(1);
const f2 = (value: number) => value.toFixed(2);

function markdown(
  store: StoreName,
  file: string,
  load: Awaited<ReturnType<typeof measureCell>>,
  probe: ProbeReport,
  breakdown: ProfileBreakdown,
  intervalUs: number,
): string {
  const requests = load.load.requests;
  const perRequest = (ms: number) => (requests === 0 ? '-' : f1((ms * 1000) / requests));
  const inclusive = new Map(breakdown.inclusive.map((row) => [row.component, row]));
  const windowS = breakdown.windowMs / 1000;
  const gc = probe.gc;
  const l = load.load;
  const perSecond = l.perSecond.length === 0 ? [0] : l.perSecond;
  return [
    `# CPU profile of the service under POST load: ${store}`,
    '',
    `- Profile: \`${file}\` (sampling every ${intervalUs} µs; window ${f2(windowS)} s, ${breakdown.sampleCount} samples)`,
    `- Under the profiler: ${Math.round(l.requestsPerSecond)} req/s, p50 ${f2(l.latencyMs.p50)} ms, p99 ${f2(l.latencyMs.p99)} ms, ` +
      `p99.9 ${f2(l.latencyMs.p999)} ms, max ${f1(l.latencyMs.max)} ms; per second ${Math.min(...perSecond)} to ${Math.max(...perSecond)} req/s; ` +
      `${l.unexpected} unexpected, ${l.errors} errors`,
    `- Server CPU ${Math.round(load.serverCpuPercent)}% of one core; main thread busy ${f1((100 * breakdown.busyMs) / breakdown.windowMs)}% ` +
      `of the window (idle ${f1((100 * breakdown.idleMs) / breakdown.windowMs)}%); event-loop utilisation ${f2(probe.eventLoopUtilization)}`,
    `- Main-thread time per request: ${perRequest(breakdown.busyMs)} µs`,
    `- Event-loop delay (monitorEventLoopDelay, 1 ms resolution): mean ${f2(probe.eventLoopDelayMs.mean)} ms, p50 ${f2(probe.eventLoopDelayMs.p50)} ms, ` +
      `p90 ${f2(probe.eventLoopDelayMs.p90)} ms, p99 ${f2(probe.eventLoopDelayMs.p99)} ms, max ${f2(probe.eventLoopDelayMs.max)} ms`,
    `- GC: ${gc.count} pauses, ${f1(gc.totalMs)} ms in all (${f2((100 * gc.totalMs) / breakdown.windowMs)}% of the window), longest ${f2(gc.maxMs)} ms; ` +
      Object.entries(gc.byKind)
        .map(
          ([kind, s]) => `${kind} ${s.count} × (total ${f1(s.totalMs)} ms, max ${f2(s.maxMs)} ms)`,
        )
        .join(', '),
    `- Memory over the window (process.memoryUsage, MB, peak / at end): ` +
      Object.keys(probe.memoryMB.peak)
        .map(
          (key) =>
            `${key} ${f1(probe.memoryMB.peak[key] ?? 0)} / ${f1(probe.memoryMB.atEnd[key] ?? 0)}`,
        )
        .join(', ') +
      `; VmHWM ${f1(load.peakRssMB)}`,
    ...(probe.statements.length === 0
      ? []
      : [
          '',
          '## better-sqlite3 calls (synchronous: each holds the event loop for its whole duration)',
          '',
          '| call | count | total ms | % of window | p50 ms | p99 ms | max ms | > 5 ms | > 20 ms |',
          '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
          ...probe.statements
            .sort((a, b) => b.totalMs - a.totalMs)
            .map(
              (t) =>
                `| ${t.method} \`${t.sql.replace(/\s+/g, ' ').slice(0, 70)}\` | ${t.count} | ${f1(t.totalMs)} | ` +
                `${f1((100 * t.totalMs) / breakdown.windowMs)} | ${f2(t.p50Ms)} | ${f2(t.p99Ms)} | ${f2(t.maxMs)} | ${t.over5Ms} | ${t.over20Ms} |`,
            ),
        ]),
    '',
    '## Where the main thread’s busy time goes',
    '',
    'Self: each sample goes to the innermost frame on its stack that belongs to a component (node',
    'internals and helper packages count for the component that called them). Inclusive: samples with',
    'the component anywhere on the stack (synchronous part only; nested components count in both).',
    '',
    '| component | self ms | self % of busy | self µs / request | inclusive % of busy |',
    '| --- | ---: | ---: | ---: | ---: |',
    ...breakdown.self.map(
      (row) =>
        `| ${row.component} | ${f1(row.ms)} | ${f1(row.percentOfBusy)} | ${perRequest(row.ms)} | ${
          inclusive.has(row.component) ? f1(inclusive.get(row.component)!.percentOfBusy) : '-'
        } |`,
    ),
    ...breakdown.inclusive
      .filter((row) => !breakdown.self.some((s) => s.component === row.component))
      .map((row) => `| ${row.component} | 0 | 0 | 0 | ${f1(row.percentOfBusy)} |`),
    '',
    '## Functions by self time',
    '',
    '| function | where | self ms | % of busy |',
    '| --- | --- | ---: | ---: |',
    ...breakdown.topSelf.map((t) => `| ${t.name} | ${t.where} | ${f1(t.ms)} | ${f1(t.percent)} |`),
    '',
    '## Functions of the project and its packages by total time',
    '',
    '| function | where | total ms | % of busy |',
    '| --- | --- | ---: | ---: |',
    ...breakdown.topTotal.map((t) => `| ${t.name} | ${t.where} | ${f1(t.ms)} | ${f1(t.percent)} |`),
    '',
  ].join('\n');
}

export async function runProfile(
  store: StoreName,
  context: Context,
  profileDir: string | undefined,
  intervalUs: number,
  outDir: string,
): Promise<void> {
  const dir = profileDir ?? fs.mkdtempSync('/tmp/plant-bench-profile-');
  fs.mkdirSync(dir, { recursive: true });
  const before = new Set(fs.readdirSync(dir));
  const probeOut = path.join(dir, `probe-${store}.json`);
  process.stderr.write(`Profiling ${store} under POST load (profiles in ${dir})\n`);
  const measurement = await measureCell(
    { id: `${store}/post`, server: 'service', store, workload: 'post', rows: 'empty' },
    1,
    context,
    { dir, intervalUs, probeOut },
  );
  // node names each thread's profile CPU.<date>.<time>.<pid>.<thread id>.<sequence>.cpuprofile;
  // the main thread's id is 0 (the SQLite store's checkpoint thread writes one of its own).
  const created = fs
    .readdirSync(dir)
    .filter((name) => /\.\d+\.0\.\d+\.cpuprofile$/.test(name) && !before.has(name));
  if (created.length === 0) throw new Error(`no main-thread .cpuprofile appeared in ${dir}`);
  const file = path.join(dir, created.sort().at(-1)!);
  const renamed = path.join(dir, `service-${store}-post.cpuprofile`);
  fs.renameSync(file, renamed);
  const probe = JSON.parse(fs.readFileSync(probeOut, 'utf8')) as ProbeReport;
  const breakdown = analyseCpuProfile(renamed, probe.windowStartUs, probe.windowEndUs);
  const text = markdown(store, renamed, measurement, probe, breakdown, intervalUs);
  process.stdout.write(`\n${text}\n`);
  fs.writeFileSync(path.join(outDir, `profile-${store}.md`), `${text}\n`);
  fs.writeFileSync(
    path.join(outDir, `profile-${store}.json`),
    `${JSON.stringify({ profile: renamed, measurement, probe, breakdown }, null, 2)}\n`,
  );
}
