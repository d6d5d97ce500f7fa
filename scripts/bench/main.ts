/**
 * `npm run bench`: the side-by-side benchmark of issue 5. Bare node:http (1), bare Express (2) and
 * the service (3) as users start it, over each store, in interleaved rounds on loopback, with the
 * server and the load generator pinned to different cores. Prints the table of medians and writes
 * it (Markdown and JSON) to --out. `--profile` adds a CPU profile of the service under POST load.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { runProfile } from './profile';
import type { Cell, Context, Measurement, Settings } from './harness';
import {
  cleanUp,
  measureCell,
  measureFullOverNormal,
  TRUSTED_POST_RATE_SECONDS,
  type AlternatedComparison,
} from './harness';
import { ID_ORDERS, type IdOrder } from './ids';
import {
  cpuFamilyModel,
  diskInterruptCpus,
  fileSystemOf,
  hasTaskset,
  isTmpfs,
  pageTableIsolation,
  pinSelf,
  type Pinning,
} from './proc';
import { alternatedLine, markdownReport, summarise } from './report';
import { checkPostgres, defaultPostgresUrl, STORE_NAMES, type StoreName } from './stores';
import { errorText } from '../../src/error-text';

/** What `--only` matches to select the alternated SQLite FULL ÷ NORMAL comparison. */
const ALTERNATED_ID = 'sqlite/full-vs-normal';

/** Seconds each server is loaded in one slice of the alternated comparison. */
const ALTERNATED_SLICE_SECONDS = 3;

/** Slices of the alternated comparison unless --alternated-slices says otherwise. */
const ALTERNATED_SLICES = 16;

const USAGE = `Usage: npm run bench -- [options]
  --quick               a smoke run of a few seconds a cell (also BENCH_QUICK=1): 1 round, 1 s
  --duration S          measured seconds per cell and round (default 10; BENCH_DURATION)
  --warmup S            unmeasured seconds before that (default 5)
  --rounds N            interleaved rounds, medians reported (default 3; BENCH_ROUNDS)
  --connections N       concurrent connections (default 50)
  --large-rows N        rows stored before the "flat with size" POST run (default 1000000; 0 skips it)
  --ids ORDER           scattered (default: ids spread over the key space) or sequential
  --stores LIST         sqlite-full,sqlite-normal,postgres (default: all; postgres skipped if unreachable)
  --only LIST           run only cells whose id contains one of these (e.g. node:http,express,sqlite-full/post;
                        full-vs-normal: the alternated comparison below)
  --alternated-slices N after the rounds, SQLite FULL and NORMAL served side by side and loaded one
                        at a time in N slices of ${ALTERNATED_SLICE_SECONDS} s each, for FULL ÷ NORMAL without the rounds'
                        drift (default ${ALTERNATED_SLICES}; 0 skips it; 0 in --quick)
  --pg-url URL          PostgreSQL server to create a schema in (default BENCH_DATABASE_URL,
                        PLANT_STORE_TEST_DATABASE_URL, or postgres://postgres@127.0.0.1:5432/test)
  --profile LIST        after the rounds, profile the service under POST load over these stores
                        (node --cpu-prof; .cpuprofile files under --profile-dir)
  --profile-only        skip the rounds; only profile (default store sqlite-full)
  --profile-dir DIR     where the .cpuprofile files go (default: a new directory under /tmp)
  --profile-interval US sampling interval of the CPU profile in microseconds (default 250)
  --service-root DIR    the project whose dist/src/main.js is measured (default: this one)
  --out DIR             where latest.md and latest.json go (default data/bench)
  --data-dir DIR        where SQLite files go: a real disk, not tmpfs (default data/bench/stores)
  --no-pin              do not pin with taskset
  --server-cpu N        the core the server is pinned to (default 1); the load generator gets
                        core 0, or core 1 when the server is on 0
  --quiet-wait S        before each run, wait up to S seconds for other processes to go quiet
                        (default 30; 0 in --quick)
  --max-other-cpu P     measure a run again (twice at most, keeping the quietest) when other
                        processes and hypervisor steal took more than P% of a core during it
                        (default 20; off in --quick)
  --help`;

interface Options {
  readonly settings: Settings;
  readonly rounds: number;
  readonly stores: readonly StoreName[];
  readonly only: readonly string[];
  readonly postgresUrl: string;
  readonly profileStores: readonly StoreName[];
  readonly profileOnly: boolean;
  readonly profileDir: string | undefined;
  readonly profileIntervalUs: number;
  readonly serviceRoot: string;
  readonly outDir: string;
  readonly dataDir: string;
  readonly pin: boolean;
  readonly serverCpu: number;
  readonly quick: boolean;
  readonly quietWaitSeconds: number;
  readonly maxOtherCpuPercent: number;
  readonly alternatedSlices: number;
}

class UsageError extends Error {}

function numberOption(
  value: string | undefined,
  fallback: number,
  name: string,
  min: number,
): number {
  if (value === undefined) return fallback;
  const parsed = Number(value);
  if (!Number.isFinite(parsed) || parsed < min)
    throw new UsageError(`${name} must be a number >= ${min}`);
  return parsed;
}

/** A core of this machine, by its number; 1 when not given (pinningFor skips pinning on one core). */
function cpuOption(value: string | undefined): number {
  if (value === undefined) return 1;
  const cpu = numberOption(value, 1, '--server-cpu', 0);
  const cores = os.availableParallelism();
  if (!Number.isInteger(cpu) || cpu >= cores)
    throw new UsageError(
      `--server-cpu must be a whole number below ${cores}, this machine's cores`,
    );
  return cpu;
}

function storeList(
  value: string | undefined,
  fallback: readonly StoreName[],
  name: string,
): StoreName[] {
  if (value === undefined) return [...fallback];
  const names = value.split(',').filter((part) => part !== '');
  for (const store of names) {
    if (!STORE_NAMES.includes(store as StoreName)) {
      throw new UsageError(`${name}: unknown store "${store}"; known: ${STORE_NAMES.join(', ')}`);
    }
  }
  return names as StoreName[];
}

function parseOptions(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    options: {
      quick: { type: 'boolean', default: false },
      duration: { type: 'string' },
      warmup: { type: 'string' },
      rounds: { type: 'string' },
      connections: { type: 'string' },
      'large-rows': { type: 'string' },
      ids: { type: 'string' },
      stores: { type: 'string' },
      only: { type: 'string' },
      'pg-url': { type: 'string' },
      profile: { type: 'string' },
      'profile-only': { type: 'boolean', default: false },
      'profile-dir': { type: 'string' },
      'profile-interval': { type: 'string' },
      'service-root': { type: 'string' },
      out: { type: 'string' },
      'data-dir': { type: 'string' },
      'no-pin': { type: 'boolean', default: false },
      'server-cpu': { type: 'string' },
      'quiet-wait': { type: 'string' },
      'max-other-cpu': { type: 'string' },
      'alternated-slices': { type: 'string' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) throw new UsageError('');
  const env = process.env;
  const quick = values.quick || env['BENCH_QUICK'] === '1' || env['BENCH_QUICK'] === 'true';
  const idOrder = (values.ids ?? 'scattered') as IdOrder;
  if (!ID_ORDERS.includes(idOrder))
    throw new UsageError(`--ids must be one of ${ID_ORDERS.join(', ')}`);
  const serviceRoot = path.resolve(
    values['service-root'] ?? path.join(__dirname, '..', '..', '..'),
  );
  const outDir = path.resolve(values.out ?? path.join(serviceRoot, 'data', 'bench'));
  const profileOnly = values['profile-only'];
  return {
    settings: {
      durationSeconds: numberOption(
        values.duration ?? env['BENCH_DURATION'],
        quick ? 1 : 10,
        '--duration',
        0.5,
      ),
      // 2 s left the JIT still warming in the window on slow hosts: there the first measured
      // second ran at 0.62x (PostgreSQL) to 0.83x (SQLite FULL) of the cell's median rate.
      warmupSeconds: numberOption(values.warmup, quick ? 0.5 : 5, '--warmup', 0),
      connections: numberOption(values.connections, 50, '--connections', 1),
      largeRows: numberOption(values['large-rows'], quick ? 20_000 : 1_000_000, '--large-rows', 0),
      idOrder,
      timeoutSeconds: 10,
    },
    rounds: numberOption(values.rounds ?? env['BENCH_ROUNDS'], quick ? 1 : 3, '--rounds', 1),
    stores: storeList(values.stores, STORE_NAMES, '--stores'),
    only: (values.only ?? '').split(',').filter((part) => part !== ''),
    postgresUrl: values['pg-url'] ?? defaultPostgresUrl(env),
    profileStores: storeList(values.profile, profileOnly ? ['sqlite-full'] : [], '--profile'),
    profileOnly,
    profileDir: values['profile-dir'],
    profileIntervalUs: numberOption(values['profile-interval'], 250, '--profile-interval', 10),
    serviceRoot,
    outDir,
    dataDir: path.resolve(values['data-dir'] ?? path.join(outDir, 'stores')),
    pin: !values['no-pin'],
    serverCpu: cpuOption(values['server-cpu']),
    quick,
    quietWaitSeconds: numberOption(values['quiet-wait'], quick ? 0 : 30, '--quiet-wait', 0),
    maxOtherCpuPercent: numberOption(
      values['max-other-cpu'],
      quick ? Infinity : 20,
      '--max-other-cpu',
      0,
    ),
    alternatedSlices: numberOption(
      values['alternated-slices'],
      quick ? 0 : ALTERNATED_SLICES,
      '--alternated-slices',
      0,
    ),
  };
}

function cellsFor(options: Options): Cell[] {
  const cells: Cell[] = [
    { id: 'node:http', server: 'node:http', workload: 'post', rows: 'empty' },
    { id: 'express', server: 'express', workload: 'post', rows: 'empty' },
    { id: 'express-born', server: 'express-born', workload: 'post', rows: 'empty' },
  ];
  for (const store of options.stores) {
    cells.push(
      { id: `${store}/post`, server: 'service', store, workload: 'post', rows: 'empty' },
      { id: `${store}/delete`, server: 'service', store, workload: 'delete', rows: 'deletable' },
      { id: `${store}/mix`, server: 'service', store, workload: 'mix', rows: 'deletable' },
    );
    if (options.settings.largeRows > 0) {
      cells.push({
        id: `${store}/post@large`,
        server: 'service',
        store,
        workload: 'post',
        rows: 'large',
      });
    }
  }
  if (options.only.length === 0) return cells;
  return cells.filter((cell) => options.only.some((part) => cell.id.includes(part)));
}

function pinningFor(options: Options, notes: string[]): Pinning {
  if (!options.pin) {
    notes.push('Not pinned (--no-pin): server and load generator share all cores.');
    return { serverCpu: null, loaderCpu: null };
  }
  if (os.availableParallelism() < 2 || !hasTaskset()) {
    notes.push('Not pinned: taskset or a second core is missing.');
    return { serverCpu: null, loaderCpu: null };
  }
  const loaderCpu = options.serverCpu === 0 ? 1 : 0;
  pinSelf(loaderCpu);
  return { serverCpu: options.serverCpu, loaderCpu };
}

async function postgresVersion(url: string): Promise<string> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ server_version: string }>('SHOW server_version');
    return `PostgreSQL ${rows[0]?.server_version ?? '?'}`;
  } finally {
    await client.end();
  }
}

function machineLine(
  options: Options,
  postgres: string | undefined,
  diskInterrupts: readonly number[] | undefined,
  isolation: string | undefined,
): string {
  const cpus = os.cpus();
  const kernel = (() => {
    try {
      return execFileSync('uname', ['-r']).toString().trim();
    } catch {
      return os.release();
    }
  })();
  const familyModel = cpuFamilyModel();
  return [
    `${cpus.length} × ${cpus[0]?.model ?? 'CPU'}${familyModel === undefined ? '' : ` (${familyModel})`}`,
    `${Math.round(os.totalmem() / 2 ** 30)} GiB`,
    `Linux ${kernel}${isolation === undefined ? '' : ` (${isolation})`}`,
    `Node ${process.version}`,
    ...(postgres === undefined ? [] : [postgres]),
    `SQLite files on ${isTmpfs(options.dataDir) ? 'tmpfs (fsync is free!)' : (fileSystemOf(options.dataDir) ?? 'disk')}`,
    ...(diskInterrupts === undefined
      ? []
      : [`the disk's interrupts on CPU ${diskInterrupts.join(' and ')}`]),
  ].join(', ');
}

/** CPU that others took during a run, in % of one core: other processes, and the hypervisor (steal). */
function noise(m: Measurement): number {
  return m.otherCpuPercent + m.stealCpuPercent;
}

function progress(m: Measurement, rounds: number, remark = ''): void {
  const l = m.load;
  const bad = l.unexpected + l.errors + l.timeouts + l.exhausted;
  process.stderr.write(
    `[round ${m.round}/${rounds}] ${m.cell.padEnd(24)} ${Math.round(l.requestsPerSecond).toString().padStart(6)} req/s` +
      `  p50 ${l.latencyMs.p50.toFixed(2)} ms  p99 ${l.latencyMs.p99.toFixed(2)} ms  max ${l.latencyMs.max.toFixed(1)} ms` +
      `  RSS ${m.peakRssMB.toFixed(1)} MB  start ${Math.round(m.startMs)} ms  server CPU ${Math.round(m.serverCpuPercent)}%` +
      `  loader CPU ${Math.round(l.loaderCpuPercent)}%  other CPU ${Math.round(m.otherCpuPercent)}%  steal ${Math.round(m.stealCpuPercent)}%` +
      `${m.waitedForQuietMs !== 0 ? `  waited ${m.waitedForQuietMs < 0 ? 'in vain' : `${Math.round(m.waitedForQuietMs)} ms`} for quiet` : ''}${m.rowsBefore > 0 ? `  rows ${m.rowsBefore} (prefill ${m.prefillMs} ms)` : ''}` +
      `${bad > 0 ? `  !! ${l.unexpected} unexpected, ${l.errors} errors, ${l.timeouts} timeouts, ${l.exhausted} exhausted` : ''}` +
      `${remark === '' ? '' : `  (${remark})`}\n`,
  );
}

async function main(): Promise<number> {
  const options = parseOptions(process.argv.slice(2));
  const notes: string[] = [];
  const mainJs = path.join(options.serviceRoot, 'dist', 'src', 'main.js');
  if (!fs.existsSync(mainJs)) {
    throw new UsageError(`${mainJs} does not exist: build the service first (npm run build)`);
  }
  fs.mkdirSync(options.dataDir, { recursive: true });
  fs.mkdirSync(options.outDir, { recursive: true });
  if (isTmpfs(options.dataDir)) {
    notes.push(
      `${options.dataDir} is tmpfs: fsync costs nothing there, so FULL and NORMAL look alike.`,
    );
  }
  let stores = options.stores;
  let postgres: string | undefined;
  const wantsPostgres = stores.includes('postgres') || options.profileStores.includes('postgres');
  if (wantsPostgres) {
    try {
      await checkPostgres(options.postgresUrl);
      postgres = await postgresVersion(options.postgresUrl);
    } catch (error) {
      const reason = errorText(error);
      notes.push(
        `PostgreSQL skipped: ${options.postgresUrl.replace(/\/\/[^@/]*@/, '//***@')} is not reachable (${reason}).`,
      );
      process.stderr.write(`${notes[notes.length - 1]}\n`);
      stores = stores.filter((store) => store !== 'postgres');
    }
  }
  const effective = { ...options, stores };
  const pinning = pinningFor(options, notes);
  const diskInterrupts = diskInterruptCpus(options.dataDir);
  if (pinning.serverCpu !== null && diskInterrupts?.[0] === pinning.serverCpu) {
    notes.push(
      `The interrupts of the SQLite files' disk land on the server's core (CPU ${pinning.serverCpu}), ` +
        'so under FULL each sync\'s completion is handled there (the record\'s "Durability").',
    );
  }
  const isolation = pageTableIsolation();
  if (isolation === 'PTI without PCID') {
    notes.push(
      'The kernel isolates its page tables (PTI) on a CPU without PCID: every entry into the ' +
        'kernel (a system call, an interrupt) empties the TLB, so each costs more than elsewhere, ' +
        'and SQLite FULL\'s syncs bring many of them (the record\'s "Durability").',
    );
  }
  const context: Context = {
    settings: options.settings,
    serviceRoot: options.serviceRoot,
    benchDir: __dirname,
    dataDir: options.dataDir,
    postgresUrl: options.postgresUrl,
    pinning,
    rateBound: 40_000,
    postRates: new Map(),
    quietWaitMs: options.quietWaitSeconds * 1000,
  };
  const { settings } = options;
  const settingsLine =
    `${settings.connections} connections, ${settings.warmupSeconds} s warm-up + ${settings.durationSeconds} s measured per cell, ` +
    `${options.rounds} interleaved round(s), ${settings.idOrder} ids, ` +
    (pinning.serverCpu === null
      ? 'unpinned'
      : `server on CPU ${pinning.serverCpu}, load generator (autocannon) on CPU ${pinning.loaderCpu}`) +
    (stores.includes('postgres') ? '; PostgreSQL runs unpinned on the same machine' : '');
  const command = `npm run bench${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`;
  let failures = 0;

  if (!options.profileOnly) {
    const cells = cellsFor(effective);
    const alternates =
      options.alternatedSlices > 0 &&
      stores.includes('sqlite-full') &&
      stores.includes('sqlite-normal') &&
      (options.only.length === 0 || options.only.some((part) => ALTERNATED_ID.includes(part)));
    if (cells.length === 0 && !alternates) throw new UsageError('--only matches no cell');
    process.stderr.write(
      `${settingsLine}\n${cells.length} cells: ${cells.map((c) => c.id).join(', ')}\n`,
    );
    const measurements: Measurement[] = [];
    for (let round = 1; round <= options.rounds; round++) {
      for (const cell of cells) {
        try {
          let measurement = await measureCell(cell, round, context);
          // Another process took CPU during the window: measure again, keep the quietest.
          let latest = measurement;
          for (let attempt = 2; attempt <= 3; attempt++) {
            if (noise(latest) <= options.maxOtherCpuPercent) break;
            progress(
              latest,
              options.rounds,
              `noisy: other processes and steal took ${Math.round(noise(latest))}%; measuring again`,
            );
            latest = await measureCell(cell, round, context);
            if (noise(latest) < noise(measurement)) measurement = latest;
          }
          if (latest !== measurement)
            progress(latest, options.rounds, 'noisy too; keeping the quietest attempt, below');
          if (cell.server === 'node:http') {
            context.rateBound = Math.max(
              measurement.load.requestsPerSecond,
              ...measurements
                .filter((m) => m.cell === 'node:http')
                .map((m) => m.load.requestsPerSecond),
            );
          }
          if (cell.server === 'service' && cell.workload === 'post' && cell.rows === 'empty') {
            const rate = measurement.load.requestsPerSecond;
            context.postRates.set(
              cell.store!,
              Math.max(rate, context.postRates.get(cell.store!) ?? 0),
            );
          }
          measurements.push(measurement);
          progress(measurement, options.rounds);
        } catch (error) {
          failures++;
          process.stderr.write(
            `[round ${round}/${options.rounds}] ${cell.id} FAILED: ${errorText(error)}\n`,
          );
        }
      }
    }
    let alternated: AlternatedComparison | undefined;
    if (alternates) {
      process.stderr.write(
        `SQLite FULL and NORMAL side by side, alternated in ${options.alternatedSlices} slices of ${ALTERNATED_SLICE_SECONDS} s each\n`,
      );
      try {
        alternated = await measureFullOverNormal(
          context,
          options.alternatedSlices,
          ALTERNATED_SLICE_SECONDS,
        );
        process.stderr.write(`${alternatedLine(alternated)}\n`);
      } catch (error) {
        failures++;
        process.stderr.write(`${ALTERNATED_ID} FAILED: ${errorText(error)}\n`);
      }
    }
    const summaries = summarise(cells, measurements);
    failures += summaries.filter(
      (s) => s.unexpected + s.exhausted + s.errors + s.timeouts > 0,
    ).length;
    if (stores.some((store) => store !== 'postgres')) {
      notes.push(
        `DELETE and mix runs start with enough prefilled rows for the run (3x the POST rate of the same store, at most bare node:http's, times the run; node:http's alone in runs under ${TRUSTED_POST_RATE_SECONDS} s); POST runs start empty except "rows before".`,
      );
    }
    const machine = machineLine(options, postgres, diskInterrupts, isolation);
    const markdown = markdownReport({
      title: `Plant store benchmark${options.quick ? ' (quick smoke: not for comparing)' : ''}`,
      machine,
      command,
      settings: settingsLine,
      summaries,
      alternated,
      notes,
    });
    process.stdout.write(`\n${markdown}\n`);
    const stamp = new Date().toISOString().replace(/[:.]/g, '-');
    const json = JSON.stringify(
      {
        generatedAt: new Date().toISOString(),
        command,
        machine,
        settings: { ...settings, rounds: options.rounds, stores, pinning },
        summaries,
        measurements,
        alternated,
        notes,
      },
      null,
      2,
    );
    const base = options.quick ? 'quick' : 'latest';
    fs.writeFileSync(path.join(options.outDir, `${base}.md`), `${markdown}\n`);
    fs.writeFileSync(path.join(options.outDir, `${base}.json`), `${json}\n`);
    if (!options.quick)
      fs.writeFileSync(path.join(options.outDir, `run-${stamp}.json`), `${json}\n`);
    process.stderr.write(`Wrote ${path.join(options.outDir, `${base}.md`)} and ${base}.json\n`);
  }

  for (const store of options.profileStores) {
    if (!stores.includes(store) && store === 'postgres' && postgres === undefined) continue;
    try {
      await runProfile(
        store,
        context,
        options.profileDir,
        options.profileIntervalUs,
        options.outDir,
      );
    } catch (error) {
      failures++;
      process.stderr.write(`profile of ${store} FAILED: ${errorText(error)}\n`);
    }
  }
  return failures === 0 ? 0 : 1;
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    process.stderr.write(`\n${signal}: stopping the server and removing the store under test\n`);
    void cleanUp().finally(() => process.exit(130));
  });
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    if (error instanceof UsageError) {
      process.stderr.write(`${error.message ? `${error.message}\n` : ''}${USAGE}\n`);
      process.exit(2);
    }
    process.stderr.write(
      `The benchmark failed: ${error instanceof Error ? error.stack : String(error)}\n`,
    );
    process.exit(1);
  },
);
