/** Medians over rounds, ratios, target checks, and the table as Markdown and JSON. */
import type { AlternatedComparison, Cell, Measurement } from './harness';
import type { StoreName } from './stores';

export interface CellSummary {
  readonly id: string;
  readonly configuration: string;
  readonly workload: string;
  readonly rounds: number;
  readonly rowsBefore: number;
  readonly requestsPerSecond: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly p999Ms: number;
  readonly maxMs: number;
  /**
   * The median over the window's seconds of each second's p99: the tail within a second, which
   * the drift of the rate from one second to the next (the host's or the server's) does not widen.
   */
  readonly p99WithinSecondMs: number;
  /** The slowest second's requests over the fastest's in the window: that drift. */
  readonly slowestSecondRatio: number;
  /** Sums over every round, warm-up included: each must be 0. */
  readonly unexpected: number;
  readonly errors: number;
  readonly timeouts: number;
  readonly exhausted: number;
  readonly statuses: Readonly<Record<string, number>>;
  readonly unexpectedSamples: readonly string[];
  /** Highest peak over the rounds, and the median peak. */
  readonly peakRssMB: number;
  readonly medianPeakRssMB: number;
  readonly startMs: number;
  readonly serverCpuPercent: number;
  readonly loaderCpuPercent: number;
  readonly otherCpuPercent: number;
  readonly databaseCpuPercent: number;
  readonly stealCpuPercent: number;
  /** Requests answered per CPU-second of the server: its efficiency, whatever limited the rate. */
  readonly requestsPerServerCpuSecond: number;
  /** Each round's figures, in round order, for ratios of two cells measured side by side. */
  readonly perRound: readonly RoundFigures[];
  /** Requests/s over the medians of (2) and (1). */
  readonly vsExpress: number | undefined;
  readonly vsNodeHttp: number | undefined;
}

export interface RoundFigures {
  readonly round: number;
  readonly requestsPerSecond: number;
  readonly requestsPerServerCpuSecond: number;
}

export function median(values: readonly number[]): number {
  const sorted = values.filter((value) => Number.isFinite(value)).sort((a, b) => a - b);
  if (sorted.length === 0) return NaN;
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

const STORE_LABELS: Record<StoreName, string> = {
  'sqlite-full': '(3) service, SQLite FULL (default)',
  'sqlite-normal': '(3) service, SQLite NORMAL',
  postgres: '(3) service, PostgreSQL',
};

function configurationOf(cell: Cell): string {
  if (cell.server === 'node:http') return '(1) bare node:http';
  if (cell.server === 'express') return '(2) bare Express 5 + express.json()';
  if (cell.server === 'express-born') return '(2b) the same, objects born with its prototypes';
  return STORE_LABELS[cell.store!];
}

const WORKLOAD_LABELS = {
  post: 'POST /plants',
  delete: 'DELETE /plants/{id}',
  mix: '50/50 POST + DELETE',
};

const requestsPerServerCpuSecond = (m: Measurement) =>
  m.load.requestsPerSecond / (m.serverCpuPercent / 100);

const slowestSecondRatio = (m: Measurement) =>
  Math.min(...m.load.perSecond) / Math.max(...m.load.perSecond);

/** The median of the p99s of the window's seconds that answered anything. */
const p99WithinSecond = (m: Measurement) =>
  median(m.load.p99PerSecondMs.filter((_, second) => m.load.perSecond[second]! > 0));

export function summarise(
  cells: readonly Cell[],
  measurements: readonly Measurement[],
): CellSummary[] {
  const partial = cells.map((cell) => {
    const runs = measurements.filter((m) => m.cell === cell.id);
    const sum = (pick: (m: Measurement) => number) => runs.reduce((total, m) => total + pick(m), 0);
    const statuses: Record<string, number> = {};
    for (const run of runs) {
      for (const [status, count] of Object.entries(run.load.statuses)) {
        statuses[status] = (statuses[status] ?? 0) + count;
      }
    }
    return {
      id: cell.id,
      configuration: configurationOf(cell),
      workload: WORKLOAD_LABELS[cell.workload],
      rounds: runs.length,
      rowsBefore: median(runs.map((m) => m.rowsBefore)),
      requestsPerSecond: median(runs.map((m) => m.load.requestsPerSecond)),
      p50Ms: median(runs.map((m) => m.load.latencyMs.p50)),
      p99Ms: median(runs.map((m) => m.load.latencyMs.p99)),
      p999Ms: median(runs.map((m) => m.load.latencyMs.p999)),
      maxMs: median(runs.map((m) => m.load.latencyMs.max)),
      p99WithinSecondMs: median(runs.map(p99WithinSecond)),
      slowestSecondRatio: median(runs.map(slowestSecondRatio)),
      unexpected: sum((m) => m.load.unexpected) + sum((m) => (m.serverExitCode === 0 ? 0 : 1)),
      errors: sum((m) => m.load.errors),
      timeouts: sum((m) => m.load.timeouts),
      exhausted: sum((m) => m.load.exhausted),
      statuses,
      unexpectedSamples: runs.flatMap((m) => m.load.unexpectedSamples).slice(0, 8),
      peakRssMB: Math.max(...runs.map((m) => m.peakRssMB)),
      medianPeakRssMB: median(runs.map((m) => m.peakRssMB)),
      startMs: median(runs.map((m) => m.startMs)),
      serverCpuPercent: median(runs.map((m) => m.serverCpuPercent)),
      loaderCpuPercent: median(runs.map((m) => m.load.loaderCpuPercent)),
      otherCpuPercent: median(runs.map((m) => m.otherCpuPercent)),
      databaseCpuPercent: median(runs.map((m) => m.databaseCpuPercent)),
      stealCpuPercent: median(runs.map((m) => m.stealCpuPercent)),
      requestsPerServerCpuSecond: median(runs.map(requestsPerServerCpuSecond)),
      perRound: runs.map((m) => ({
        round: m.round,
        requestsPerSecond: m.load.requestsPerSecond,
        requestsPerServerCpuSecond: requestsPerServerCpuSecond(m),
      })),
    };
  });
  const rateOf = (id: string) => partial.find((s) => s.id === id)?.requestsPerSecond;
  const express = rateOf('express');
  const nodeHttp = rateOf('node:http');
  return partial.map((s) => ({
    ...s,
    vsExpress: express === undefined ? undefined : s.requestsPerSecond / express,
    vsNodeHttp: nodeHttp === undefined ? undefined : s.requestsPerSecond / nodeHttp,
  }));
}

const fixed = (value: number | undefined, digits: number) =>
  value === undefined || !Number.isFinite(value) ? '-' : value.toFixed(digits);
const whole = (value: number) =>
  Number.isFinite(value) ? Math.round(value).toLocaleString('en-US') : '-';

export function markdownTable(summaries: readonly CellSummary[]): string {
  const header = [
    'configuration',
    'workload',
    'rows before',
    'req/s',
    'p50 ms',
    'p99 ms',
    'max ms',
    'p99 in a second ms',
    'slowest ÷ fastest second',
    'unexpected',
    'errors / timeouts',
    'peak RSS MB',
    'start ms',
    'server CPU %',
    'req / server CPU-s',
    'DB CPU %',
    'loader CPU %',
    'other CPU %',
    'steal %',
    '÷ (2)',
    '÷ (1)',
  ];
  const rows = summaries.map((s) => [
    s.configuration,
    s.workload,
    whole(s.rowsBefore),
    whole(s.requestsPerSecond),
    fixed(s.p50Ms, 2),
    fixed(s.p99Ms, 2),
    fixed(s.maxMs, 1),
    fixed(s.p99WithinSecondMs, 2),
    `${fixed(s.slowestSecondRatio, 2)}x`,
    String(s.unexpected + s.exhausted),
    `${s.errors} / ${s.timeouts}`,
    fixed(s.peakRssMB, 1),
    whole(s.startMs),
    whole(s.serverCpuPercent),
    whole(s.requestsPerServerCpuSecond),
    s.id.startsWith('postgres') ? whole(s.databaseCpuPercent) : '-',
    whole(s.loaderCpuPercent),
    whole(s.otherCpuPercent),
    whole(s.stealCpuPercent),
    s.vsExpress === undefined ? '-' : `${fixed(s.vsExpress, 2)}x`,
    s.vsNodeHttp === undefined ? '-' : `${fixed(s.vsNodeHttp, 2)}x`,
  ]);
  const widths = header.map((title, i) =>
    Math.max(title.length, ...rows.map((row) => row[i]!.length)),
  );
  const numeric = (i: number) => i >= 2;
  const line = (cells: readonly string[]) =>
    `| ${cells.map((cell, i) => (numeric(i) ? cell.padStart(widths[i]!) : cell.padEnd(widths[i]!))).join(' | ')} |`;
  const rule = `| ${widths.map((width, i) => (numeric(i) ? `${'-'.repeat(width - 1)}:` : '-'.repeat(width))).join(' | ')} |`;
  return [line(header), rule, ...rows.map(line)].join('\n');
}

export interface Comparison {
  readonly what: string;
  /**
   * The ratio of requests/s: the median of the rounds' ratios when two or more rounds hold both
   * cells, else the ratio of the cells' medians. The two cells of a round run minutes apart at
   * most, while a machine's speed drifts by a third over a run: pairing them by round takes the
   * drift out, and the cells' medians may come from different rounds.
   */
  readonly value: number;
  /** Of the cells' median requests/s. */
  readonly ofMedians: number;
  /** Of each round's requests/s, in round order. */
  readonly perRound: readonly number[];
  /** Of the cells' requests per server CPU-second: the CPU cost, whatever else limited the rate. */
  readonly perCpuSecond: number;
}

/** Cell `a`'s requests/s over cell `b`'s: paired by round (see Comparison.value), and as medians. */
function ratioOf(
  a: CellSummary,
  b: CellSummary,
): Pick<Comparison, 'value' | 'ofMedians' | 'perRound'> {
  const perRound = a.perRound.flatMap((x) => {
    const y = b.perRound.find((candidate) => candidate.round === x.round);
    return y === undefined ? [] : [x.requestsPerSecond / y.requestsPerSecond];
  });
  const ofMedians = a.requestsPerSecond / b.requestsPerSecond;
  return { value: perRound.length >= 2 ? median(perRound) : ofMedians, ofMedians, perRound };
}

function compare(what: string, a: CellSummary, b: CellSummary): Comparison {
  return {
    what,
    ...ratioOf(a, b),
    perCpuSecond: a.requestsPerServerCpuSecond / b.requestsPerServerCpuSecond,
  };
}

/** FULL over NORMAL, and a large store over an empty one, in requests/s. */
export function comparisons(summaries: readonly CellSummary[]): Comparison[] {
  const find = (id: string) => summaries.find((s) => s.id === id);
  const out: Comparison[] = [];
  for (const workload of ['post', 'delete', 'mix']) {
    const full = find(`sqlite-full/${workload}`);
    const normal = find(`sqlite-normal/${workload}`);
    if (full !== undefined && normal !== undefined) {
      out.push(compare(`SQLite FULL ÷ NORMAL, ${workload}`, full, normal));
    }
  }
  for (const store of ['sqlite-full', 'sqlite-normal', 'postgres']) {
    const empty = find(`${store}/post`);
    const large = find(`${store}/post@large`);
    if (empty !== undefined && large !== undefined) {
      out.push(compare(`${store}: POST with the large store ÷ empty store`, large, empty));
    }
  }
  return out;
}

/** Each round's ratio and the ratio of the medians, when two or more rounds were paired. */
function roundsText({ perRound, ofMedians }: Pick<Comparison, 'perRound' | 'ofMedians'>): string {
  return perRound.length < 2
    ? ''
    : `rounds ${perRound.map((r) => `${fixed(r, 2)}x`).join(', ')}; ` +
        `ratio of the medians ${fixed(ofMedians, 2)}x`;
}

function comparisonLine(c: Comparison): string {
  const rounds = roundsText(c);
  return `- ${c.what}: ${fixed(c.value, 2)}x (${rounds === '' ? '' : `${rounds}; `}per server CPU-second ${fixed(c.perCpuSecond, 2)}x)`;
}

/** The alternated comparison's line: its estimate, each slice's ratio, the CPU per request and the p99. */
export function alternatedLine(a: AlternatedComparison): string {
  const { requests, cpuPerRequest, p99 } = a;
  return (
    `- ${a.what} (${a.slices} slices of ${a.seconds} s per setting, one server loaded at a time): ` +
    `${fixed(requests.mean, 2)}x (two standard errors ${fixed(requests.low, 2)}x to ${fixed(requests.high, 2)}x; ` +
    `slices ${a.perSlice.map((r) => `${fixed(r, 2)}x`).join(', ')}; ` +
    `CPU per request ${fixed(cpuPerRequest.mean, 2)}x, p99 latency ${fixed(p99.mean, 2)}x)`
  );
}

export interface TargetCheck {
  readonly target: string;
  readonly measured: string;
  readonly met: boolean;
}

/**
 * Issue 5's targets, read off the table. Informational: the benchmark never fails on timing.
 * FULL ÷ NORMAL is read off the alternated comparison when there is one, which the drift between
 * rounds does not move.
 */
export function targetChecks(
  summaries: readonly CellSummary[],
  alternated?: AlternatedComparison,
): TargetCheck[] {
  const checks: TargetCheck[] = [];
  const find = (id: string) => summaries.find((s) => s.id === id);
  const express = find('express');
  for (const store of ['sqlite-full', 'sqlite-normal', 'postgres']) {
    for (const workload of ['post', 'delete']) {
      const s = find(`${store}/${workload}`);
      if (s === undefined) continue;
      if (express !== undefined) {
        // Paired by round, as the comparisons are (see Comparison.value), with each round's ratio.
        const ratio = ratioOf(s, express);
        const rounds = roundsText(ratio);
        checks.push({
          target: `${store} ${workload}: >= 0.6x bare Express req/s`,
          measured: `${fixed(ratio.value, 2)}x${rounds === '' ? '' : ` (${rounds})`}`,
          met: ratio.value >= 0.6,
        });
      }
      checks.push({
        target: `${store} ${workload}: p99 <= 25 ms`,
        measured:
          `${fixed(s.p99Ms, 1)} ms (${fixed(s.p99WithinSecondMs, 1)} ms within a second; ` +
          `the slowest second ${fixed(s.slowestSecondRatio, 2)}x the fastest)`,
        met: s.p99Ms <= 25,
      });
    }
  }
  const full = find('sqlite-full/post');
  const normal = find('sqlite-normal/post');
  const byRound = full && normal && ratioOf(full, normal).value;
  const fullOverNormal = alternated?.requests.mean ?? byRound;
  if (fullOverNormal !== undefined) {
    checks.push({
      target: 'SQLite FULL POST >= 0.9x NORMAL POST',
      measured:
        alternated === undefined
          ? `${fixed(fullOverNormal, 2)}x`
          : `${fixed(fullOverNormal, 2)}x alternated` +
            (byRound === undefined ? '' : ` (by round ${fixed(byRound, 2)}x)`),
      met: fullOverNormal >= 0.9,
    });
  }
  for (const store of ['sqlite-full', 'sqlite-normal', 'postgres']) {
    const empty = find(`${store}/post`);
    const large = find(`${store}/post@large`);
    if (empty === undefined || large === undefined) continue;
    const { value } = ratioOf(large, empty);
    // One-sided: a large store is never faster than an empty one but by the machine's drift.
    checks.push({
      target: `${store}: POST with ${whole(large.rowsBefore)} rows at most 10% slower than empty`,
      measured: `${fixed(value, 2)}x`,
      met: value >= 0.9,
    });
  }
  const service = summaries.filter((s) => s.configuration.startsWith('(3)'));
  if (service.length > 0) {
    const rss = Math.max(...service.map((s) => s.peakRssMB));
    checks.push({
      target: 'service peak RSS <= 120 MB',
      measured: `${fixed(rss, 1)} MB`,
      met: rss <= 120,
    });
    const start = Math.max(...service.map((s) => s.startMs));
    checks.push({
      target: 'service start to first answer <= 1 s (worst median)',
      measured: `${whole(start)} ms`,
      met: start <= 1000,
    });
  }
  return checks;
}

/** Measurements not to trust as they stand: a saturated load generator, a busy machine. */
function warnings(summaries: readonly CellSummary[]): string[] {
  const out: string[] = [];
  for (const s of summaries) {
    if (s.loaderCpuPercent >= 90) {
      out.push(
        `- **${s.id}: the load generator used ${whole(s.loaderCpuPercent)}% of its core**, so its req/s is a lower bound ` +
          `(the server used ${whole(s.serverCpuPercent)}%; at 100% it would answer about ` +
          `${whole(s.requestsPerServerCpuSecond)} req/s).`,
      );
    }
    if (s.otherCpuPercent + s.stealCpuPercent >= 20) {
      out.push(
        `- **${s.id}: other processes and hypervisor steal took ${whole(s.otherCpuPercent + s.stealCpuPercent)}% of a core** during the run: noisy.`,
      );
    }
  }
  return out.length === 0 ? [] : [...out, ''];
}

export function markdownReport(options: {
  readonly title: string;
  readonly machine: string;
  readonly command: string;
  readonly settings: string;
  readonly summaries: readonly CellSummary[];
  readonly alternated?: AlternatedComparison | undefined;
  readonly notes: readonly string[];
}): string {
  const { summaries, alternated } = options;
  const compared = comparisons(summaries);
  const targets = targetChecks(summaries, alternated);
  const problems = summaries.filter((s) => s.unexpected + s.exhausted + s.errors + s.timeouts > 0);
  return [
    `# ${options.title}`,
    '',
    `- Machine: ${options.machine}`,
    `- Command: \`${options.command}\``,
    `- Settings: ${options.settings}`,
    '',
    ...(summaries.length === 0
      ? []
      : [
          markdownTable(summaries),
          '',
          'Medians over the rounds (peak RSS: the highest of the rounds). "unexpected" counts every status',
          'other than 200 (create) or 204 (delete), warm-up included, and must be 0. ÷ (2) and ÷ (1) are',
          'req/s over bare Express and bare node:http, which both serve the same POST body. CPU % is of one',
          'core over the measured window; "DB" is PostgreSQL\'s processes, "other" every process not ours,',
          '"steal" what the hypervisor gave to other machines. "p99 in a second" is the median over the',
          'window\'s seconds of each second\'s p99, and "slowest ÷ fastest second" the requests of the',
          "window's slowest second over its fastest's: where the p99 is well above the first, the tail",
          'comes from the rate drifting between seconds (the host or the server slowing for a while), not',
          'from stalls within a second; bare node:http and Express show the drift of the host itself.',
          '',
        ]),
    ...warnings(summaries),
    ...(compared.length === 0 && alternated === undefined
      ? []
      : [
          '## Comparisons',
          '',
          'Requests/s of one cell over another: the median of the ratios of the rounds, in which the',
          'two cells ran minutes apart at most (with one round, the ratio of the medians). Alternated:',
          'both servers running, loaded one at a time in slices (NORMAL FULL, FULL NORMAL, ...), the',
          "geometric mean of the slices' ratios; its CPU per request is of all the server's threads.",
          '',
          ...compared.map(comparisonLine),
          ...(alternated === undefined ? [] : [alternatedLine(alternated)]),
          '',
        ]),
    ...(targets.length === 0
      ? []
      : [
          "## Issue 5's targets (informational)",
          '',
          ...targets.map((t) => `- [${t.met ? 'x' : ' '}] ${t.target}: ${t.measured}`),
          '',
        ]),
    ...(problems.length === 0
      ? []
      : [
          '## Unexpected answers or errors',
          '',
          ...problems.flatMap((s) => [
            `- ${s.id}: statuses ${JSON.stringify(s.statuses)}, errors ${s.errors}, timeouts ${s.timeouts}, ids exhausted ${s.exhausted}`,
            ...s.unexpectedSamples.map((sample) => `  - ${sample}`),
          ]),
          '',
        ]),
    ...(options.notes.length === 0
      ? []
      : ['## Notes', '', ...options.notes.map((n) => `- ${n}`), '']),
  ].join('\n');
}
