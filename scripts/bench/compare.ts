/**
 * `npm run bench:compare -- --base DIR`: two builds of the service served at the same time, both
 * pinned to one shared core, under equal POST load from the other core, in slices; prints, per
 * slice and as medians, how many requests B (this project, or --root) answered per request of A
 * (--base), and their CPU per request. The machine's slow spells hit both servers alike, so the
 * ratio holds where sequential runs drift: the way to see a change of a few percent on a noisy
 * machine. The same build twice, with different variables (--env-a, --env-b), compares settings.
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
import { prepareStore, type PreparedStore } from './stores';

const USAGE = `Usage: npm run bench:compare -- --base DIR [options]
  --base DIR        the project (built: dist/) measured as A
  --root DIR        the project measured as B (default: this one)
  --env-a K=V,...   variables for A only (e.g. SQLITE_SYNCHRONOUS=NORMAL)
  --env-b K=V,...   variables for B only
  --slices N        measured slices (default 8), each --seconds long (default 3)
  --connections N   connections to each server (default 25)
  --rows N          plants stored in each store before the run (default 0)`;

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
  const pinned = hasTaskset() && os.availableParallelism() >= 2;
  if (pinned) pinSelf(0);
  const dataDir = path.join(roots[1]!, 'data', 'bench', 'stores');
  const stores: PreparedStore[] = [];
  const servers: { token: string; server: RunningServer }[] = [];
  let counter = POST_COUNTER_BASE;
  try {
    for (const [i, root] of roots.entries()) {
      const store = await prepareStore('sqlite-full', {
        serviceRoot: root,
        dataDir,
        postgresUrl: '',
        label: `compare-${'ab'[i]}`,
        rows,
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
    await Promise.all(servers.map((target) => load(target, 2)));
    const ratios: number[] = [];
    const cpuRatios: number[] = [];
    for (let slice = 1; slice <= slices; slice++) {
      const before = servers.map(({ server }) => cpuMsOf(server.pid));
      const results = await Promise.all(servers.map((target) => load(target, seconds)));
      const cpuUs = servers.map(
        ({ server }, i) => ((cpuMsOf(server.pid) - before[i]!) * 1000) / results[i]!.requests.total,
      );
      const bad = results.reduce((sum, result) => sum + result.non2xx + result.errors, 0);
      if (bad > 0) throw new Error(`slice ${slice}: ${bad} answers were not 200`);
      ratios.push(results[1]!.requests.total / results[0]!.requests.total);
      cpuRatios.push(cpuUs[1]! / cpuUs[0]!);
      console.log(
        `slice ${slice}: req/s A ${results[0]!.requests.average.toFixed(0)} B ${results[1]!.requests.average.toFixed(0)}` +
          `  CPU µs/request A ${cpuUs[0]!.toFixed(0)} B ${cpuUs[1]!.toFixed(0)}  B/A ${ratios.at(-1)!.toFixed(3)}`,
      );
    }
    console.log(
      `B/A requests answered: median ${median(ratios).toFixed(3)} (${ratios.map((r) => r.toFixed(2)).join(' ')});` +
        ` B/A CPU per request: median ${median(cpuRatios).toFixed(3)}`,
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
