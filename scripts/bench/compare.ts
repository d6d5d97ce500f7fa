/**
 * `npm run bench:compare -- --base DIR`: two builds of the service served at the same time, both
 * pinned to one shared core, under equal POST load from the other core, in slices; prints, per
 * slice and as medians, how many requests B (this project, or --root) answered per request of A
 * (--base), and their CPU per request. The machine's slow spells hit both servers alike, so the
 * ratio holds where sequential runs drift: the way to see a change of a few percent on a noisy
 * machine. The same build twice, with different variables (--env-a, --env-b), compares settings.
 *
 * Sharing the core hides waits for the disk: while one server waits for a sync, the other takes
 * the core. `--alternate` loads one server at a time instead, A B, then B A, and so on, each slice
 * against the slice next to it, so that what a server waits for counts (a change to syncing, or
 * SQLite FULL against NORMAL), while drifts of the machine slower than a few seconds still cancel.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { startServiceOver, type StartedService } from './harness';
import { hasTaskset, pinSelf } from './proc';
import { median } from './report';
import { describeEstimate, runSlices, type RatioEstimate } from './slices';
import { defaultPostgresUrl } from './stores';
import { errorText } from '../../src/error-text';

const USAGE = `Usage: npm run bench:compare -- --base DIR [options]
  --base DIR        the project (built: dist/) measured as A
  --root DIR        the project measured as B (default: this one)
  --env-a K=V,...   variables for A only (e.g. SQLITE_SYNCHRONOUS=NORMAL)
  --env-b K=V,...   variables for B only
  --slices N        measured slices (default 8), each --seconds long (default 3)
  --connections N   connections to each server (default 25)
  --pipelining N    requests each connection sends before it waits for an answer (default 1)
  --rows N          plants stored in each store before the run (default 0)
  --rows-a N        plants stored in A's store instead (B's keeps --rows): a large store against
                    a small one
  --store NAME      sqlite (default: SQLite, FULL unless SQLITE_SYNCHRONOUS is given) or postgres
  --pg-url URL      PostgreSQL server for --store postgres (as for npm run bench)
  --alternate       load one server at a time (A B, B A, ...) instead of both at once, so that
                    waits for the disk count; each slice is then --seconds for A and for B`;

function variables(list: string | undefined): Record<string, string> {
  const pairs = (list ?? '').split(',').filter((pair) => pair !== '');
  // Split at the first '=' only: a value may hold one (NODE_OPTIONS=--v8-pool-size=1).
  return Object.fromEntries(
    pairs.map((pair) => {
      const at = pair.indexOf('=');
      return at < 0 ? [pair, ''] : [pair.slice(0, at), pair.slice(at + 1)];
    }),
  );
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      base: { type: 'string' },
      root: { type: 'string' },
      'env-a': { type: 'string' },
      'env-b': { type: 'string' },
      slices: { type: 'string' },
      seconds: { type: 'string' },
      connections: { type: 'string' },
      pipelining: { type: 'string' },
      rows: { type: 'string' },
      'rows-a': { type: 'string' },
      alternate: { type: 'boolean' },
      store: { type: 'string' },
      'pg-url': { type: 'string' },
      help: { type: 'boolean' },
    },
  });
  if (values.help === true || values.base === undefined) {
    console.log(USAGE);
    process.exitCode = values.help === true ? 0 : 2;
    return;
  }
  const roots = [
    path.resolve(values.base),
    path.resolve(values.root ?? path.join(__dirname, '..', '..', '..')),
  ];
  const envs = [variables(values['env-a']), variables(values['env-b'])];
  const slices = Number(values.slices ?? 8);
  const seconds = Number(values.seconds ?? 3);
  const connections = Number(values.connections ?? 25);
  const pipelining = Number(values.pipelining ?? 1);
  const rows = Number(values.rows ?? 0);
  const rowsOf = [Number(values['rows-a'] ?? rows), rows];
  const alternate = values.alternate === true;
  if (values.store !== undefined && !['sqlite', 'postgres'].includes(values.store)) {
    throw new Error(`--store must be sqlite or postgres, not ${values.store}`);
  }
  const storeName = values.store === 'postgres' ? 'postgres' : 'sqlite-full';
  const pinned = hasTaskset() && os.availableParallelism() >= 2;
  if (pinned) pinSelf(0);
  const dataDir = path.join(roots[1]!, 'data', 'bench', 'stores');
  fs.mkdirSync(dataDir, { recursive: true });
  const services: StartedService[] = [];
  try {
    for (const [i, root] of roots.entries()) {
      services.push(
        await startServiceOver({
          serviceRoot: root,
          dataDir,
          postgresUrl: values['pg-url'] ?? defaultPostgresUrl(),
          cpu: pinned ? 1 : null,
          store: storeName,
          label: `compare-${'ab'[i]}`,
          rows: rowsOf[i]!,
          env: envs[i]!,
        }),
      );
    }
    const results = await runSlices({
      targets: [services[0]!.target, services[1]!.target],
      alternate,
      slices,
      seconds,
      connections,
      pipelining,
      onSlice: ({ requests, cpuUsPerRequest: cpuUs, p99Ms }, index) =>
        console.log(
          `slice ${index + 1}: req/s A ${(requests[0] / seconds).toFixed(0)} B ${(requests[1] / seconds).toFixed(0)}` +
            `  CPU µs/request A ${cpuUs[0].toFixed(0)} B ${cpuUs[1].toFixed(0)}` +
            `  p99 ms A ${p99Ms[0]} B ${p99Ms[1]}  B/A ${(requests[1] / requests[0]).toFixed(3)}`,
        ),
    });
    const { requestRatios: ratios, cpuRatios, p99Ratios } = results;
    const answered = [0, 1].map((i) =>
      results.slices.reduce((sum, slice) => sum + slice.requests[i as 0 | 1], 0),
    );
    /** A ratio's median over the slices (then, given `each`, every slice's), and its geometric mean. */
    const summary = (perSlice: readonly number[], mean: RatioEstimate, each = false) =>
      `median ${median(perSlice).toFixed(3)}` +
      (each ? ` (${perSlice.map((r) => r.toFixed(2)).join(' ')})` : '') +
      `, geometric mean ${describeEstimate(mean)}`;
    console.log(
      `B/A requests answered: ${summary(ratios, results.requests, true)}\n` +
        `B/A CPU per request: ${summary(cpuRatios, results.cpuPerRequest)}\n` +
        `B/A p99 latency: ${summary(p99Ratios, results.p99)}\n` +
        `Plants created in the measured slices (each store grew by as many): A ${answered[0]}, B ${answered[1]}`,
    );
  } finally {
    for (const service of services) await service.close();
  }
}

main().catch((error: unknown) => {
  console.error(errorText(error));
  process.exitCode = 1;
});
