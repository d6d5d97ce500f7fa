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
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import { serverEnv, serviceStartArgs } from './harness';
import { createBody, plantId, POST_COUNTER_BASE } from './ids';
import {
  cpuMsOf,
  freePort,
  hasTaskset,
  pinSelf,
  startServer,
  stopServer,
  type RunningServer,
} from './proc';
import { defaultPostgresUrl, prepareStore, type PreparedStore } from './stores';

const USAGE = `Usage: npm run bench:compare -- --base DIR [options]
  --base DIR        the project (built: dist/) measured as A
  --root DIR        the project measured as B (default: this one)
  --env-a K=V,...   variables for A only (e.g. SQLITE_SYNCHRONOUS=NORMAL)
  --env-b K=V,...   variables for B only
  --slices N        measured slices (default 8), each --seconds long (default 3)
  --connections N   connections to each server (default 25)
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

const median = (values: readonly number[]) =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

/**
 * The geometric mean of ratios, and the range of two standard errors around it (on the log scale,
 * so 1/x is the mirror of x): about 95% of such runs would land their mean there.
 */
function geometricMean(ratios: readonly number[]): string {
  const logs = ratios.map(Math.log);
  const mean = logs.reduce((sum, value) => sum + value, 0) / logs.length;
  const variance = logs.reduce((sum, value) => sum + (value - mean) ** 2, 0) / (logs.length - 1);
  const spread = 2 * Math.sqrt(variance / logs.length);
  const [low, mid, high] = [mean - spread, mean, mean + spread].map((v) => Math.exp(v).toFixed(3));
  return logs.length < 2 ? `${mid}` : `${mid} (two standard errors: ${low} to ${high})`;
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
  const stores: PreparedStore[] = [];
  const servers: { token: string; server: RunningServer }[] = [];
  let counter = POST_COUNTER_BASE;
  try {
    for (const [i, root] of roots.entries()) {
      const store = await prepareStore(storeName, {
        serviceRoot: root,
        dataDir,
        postgresUrl: values['pg-url'] ?? defaultPostgresUrl(),
        label: `compare-${'ab'[i]}`,
        rows: rowsOf[i]!,
        idOrder: 'scattered',
      });
      stores.push(store);
      const port = await freePort();
      servers.push({
        token: store.token,
        server: await startServer({
          cpu: pinned ? 1 : null,
          args: serviceStartArgs(root),
          env: serverEnv({ HOST: '127.0.0.1', PORT: String(port), ...store.env, ...envs[i] }),
          port,
          cwd: root,
          logFile: path.join(dataDir, `compare-${'ab'[i]}.log`),
        }),
      });
    }
    const load = (target: (typeof servers)[number], duration: number) =>
      autocannon({
        url: target.server.url,
        connections,
        duration,
        headers: { authorization: `Bearer ${target.token}` },
        requests: [
          {
            method: 'POST',
            path: '/plants',
            headers: { 'content-type': 'application/json' },
            setupRequest: (request) => ({
              ...request,
              body: createBody(plantId(counter++, 'scattered')),
            }),
          },
        ],
      });
    /** Loads the servers `order` names, together or (alternating) one after the other. */
    const measure = async (order: readonly number[]) => {
      const requests: number[] = [];
      const cpuUs: number[] = [];
      const loadSome = async (some: readonly number[]) => {
        const before = some.map((i) => cpuMsOf(servers[i]!.server.pid));
        const results = await Promise.all(some.map((i) => load(servers[i]!, seconds)));
        for (const [k, i] of some.entries()) {
          const result = results[k]!;
          if (result.non2xx + result.errors > 0) {
            throw new Error(`${result.non2xx + result.errors} answers of ${'AB'[i]} were not 200`);
          }
          requests[i] = result.requests.total;
          cpuUs[i] =
            ((cpuMsOf(servers[i]!.server.pid) - before[k]!) * 1000) / result.requests.total;
        }
      };
      if (alternate) for (const i of order) await loadSome([i]);
      else await loadSome(order);
      return { requests, cpuUs };
    };
    // Warm-up: 2 s of load on each.
    if (alternate) for (const target of servers) await load(target, 2);
    else await Promise.all(servers.map((target) => load(target, 2)));
    const ratios: number[] = [];
    const cpuRatios: number[] = [];
    const answered = [0, 0];
    for (let slice = 1; slice <= slices; slice++) {
      // Alternating, B goes second in odd slices and first in even ones: a drift within a pair cancels over two.
      const { requests, cpuUs } = await measure(slice % 2 === 1 ? [0, 1] : [1, 0]);
      ratios.push(requests[1]! / requests[0]!);
      for (const i of [0, 1]) answered[i]! += requests[i]!;
      cpuRatios.push(cpuUs[1]! / cpuUs[0]!);
      const perSecond = requests.map((total) => (total / seconds).toFixed(0));
      console.log(
        `slice ${slice}: req/s A ${perSecond[0]} B ${perSecond[1]}` +
          `  CPU µs/request A ${cpuUs[0]!.toFixed(0)} B ${cpuUs[1]!.toFixed(0)}  B/A ${ratios.at(-1)!.toFixed(3)}`,
      );
    }
    console.log(
      `B/A requests answered: median ${median(ratios).toFixed(3)} (${ratios.map((r) => r.toFixed(2)).join(' ')}),` +
        ` geometric mean ${geometricMean(ratios)}\n` +
        `B/A CPU per request: median ${median(cpuRatios).toFixed(3)}, geometric mean ${geometricMean(cpuRatios)}\n` +
        `Plants created in the measured slices (each store grew by as many): A ${answered[0]}, B ${answered[1]}`,
    );
  } finally {
    for (const { server } of servers) await stopServer(server);
    for (const store of stores) await store.dispose();
  }
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exitCode = 1;
});
