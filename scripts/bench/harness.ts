/** One measurement: a fresh store, a fresh server process, one load run, the server's numbers. */
import fs from 'node:fs';
import path from 'node:path';
import type { IdOrder } from './ids';
import type { LoadEvent, LoadResult, LoadSpec, Workload } from './load-spec';
import {
  cpuMsOf,
  freePort,
  cpuSince,
  machineCpu,
  postgresCpuMs,
  memoryOf,
  pinThreads,
  runNode,
  startServer,
  stopServer,
  stopServerAndSettleLog,
  waitForQuiet,
  type Pinning,
} from './proc';
import { runSlices, type RatioEstimate, type SliceTarget } from './slices';
import { prepareStore, type PreparedStore, type StoreName } from './stores';

export type ServerKind = 'node:http' | 'express' | 'express-born' | 'service';

/** What a store holds before the server starts. */
export type Rows = 'empty' | 'large' | 'deletable';

export interface Cell {
  /** Stable name, e.g. `sqlite-full/post@large`; `--only` matches it. */
  readonly id: string;
  readonly server: ServerKind;
  readonly store?: StoreName;
  readonly workload: Workload;
  readonly rows: Rows;
}

export interface Settings {
  readonly durationSeconds: number;
  readonly warmupSeconds: number;
  readonly connections: number;
  readonly largeRows: number;
  readonly idOrder: IdOrder;
  readonly timeoutSeconds: number;
}

export interface Context {
  readonly settings: Settings;
  /** Holds dist/src/main.js and dist/scripts/token.js: the service under test. */
  readonly serviceRoot: string;
  /** Holds the compiled benchmark (this file's directory). */
  readonly benchDir: string;
  readonly dataDir: string;
  readonly postgresUrl: string;
  readonly pinning: Pinning;
  /** Requests/s no server here can exceed (bare node:http's, once measured): sizes DELETE prefills. */
  rateBound: number;
  /** The fastest POST /plants on an empty store seen so far, per store. */
  readonly postRates: Map<StoreName, number>;
  /** Before each run, wait up to this long for other processes to go quiet (0: do not wait). */
  readonly quietWaitMs: number;
}

export interface Measurement {
  readonly cell: string;
  readonly round: number;
  readonly rowsBefore: number;
  readonly prefillMs: number;
  readonly startMs: number;
  /** VmHWM of the server process at the end of the run, in MB (10^6 bytes). */
  readonly peakRssMB: number;
  /** Server CPU time over the window, in % of one core. */
  readonly serverCpuPercent: number;
  /**
   * CPU time of every other process over the window (in % of one core): the machine's process
   * time less the server's, the load generator's, PostgreSQL's and this process's: noise.
   */
  readonly otherCpuPercent: number;
  /** PostgreSQL's server processes over the window, % of one core (0 for the other stores). */
  readonly databaseCpuPercent: number;
  /** Interrupt (mostly loopback networking) and hypervisor steal time over the window, % of one core. */
  readonly interruptCpuPercent: number;
  readonly stealCpuPercent: number;
  /** How long the run waited for the machine to be quiet first (ms; -1: it never was). */
  readonly waitedForQuietMs: number;
  readonly serverExitCode: number | null;
  readonly load: LoadResult;
}

/** What an interrupted run must undo: the running server, the prepared store. */
const cleanups = new Set<() => Promise<unknown>>();

/** Stops whatever measurement is under way (for SIGINT and SIGTERM). */
export async function cleanUp(): Promise<void> {
  for (const cleanup of [...cleanups].reverse()) await cleanup().catch(() => undefined);
  cleanups.clear();
}

export interface ProfileRequest {
  readonly dir: string;
  readonly intervalUs: number;
  readonly probeOut: string;
}

/** Variables the benchmark sets itself; any inherited value would change what is measured. */
const OWN_VARIABLES = [
  'DATABASE_URL',
  'SQLITE_PATH',
  'SQLITE_SYNCHRONOUS',
  'WORKERS',
  'HOST',
  'PORT',
  'VALIDATE_RESPONSES',
  'NODE_OPTIONS',
  'BENCH_PROBE_OUT',
  'BARE_EXPRESS_BORN_PROTOTYPES',
];

export function serverEnv(extra: Readonly<Record<string, string>>): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const name of OWN_VARIABLES) delete env[name];
  return { ...env, ...extra };
}

/** Measured seconds from which a POST run's rate sizes the prefill of the DELETE runs after it. */
export const TRUSTED_POST_RATE_SECONDS = 5;

function rowsFor(cell: Cell, context: Context): number {
  const { settings } = context;
  if (cell.server !== 'service') return 0;
  if (cell.rows === 'large') return settings.largeRows;
  if (cell.rows === 'empty') return 0;
  // Every DELETE needs an existing id: more than this server could delete in the whole run. A
  // delete costs the service no more than three creates (it has no body); nothing beats node:http.
  // A POST rate measured over a few seconds (the --quick smoke) is mostly warm-up, the JIT and the
  // collector still settling, and has been a sixth of the DELETE rate that followed: it is not
  // used, and the rows are as many as node:http could answer.
  const postRate =
    settings.durationSeconds >= TRUSTED_POST_RATE_SECONDS
      ? context.postRates.get(cell.store!)
      : undefined;
  const bound = Math.min(context.rateBound, postRate === undefined ? Infinity : 3 * postRate);
  const seconds = settings.warmupSeconds + settings.durationSeconds + 1;
  const deletes = Math.ceil(bound * seconds * 1.2) + 2 * settings.connections;
  return cell.workload === 'mix' ? Math.ceil(deletes / 2) : deletes;
}

/** Runs the load generator on its own core; `onEvent` sees the window open and close. */
async function runLoader(
  context: Context,
  spec: LoadSpec,
  onEvent: (event: LoadEvent) => void,
): Promise<LoadResult> {
  let result: LoadResult | undefined;
  await runNode(
    context.pinning.loaderCpu,
    [path.join(context.benchDir, 'load.js'), JSON.stringify(spec)],
    process.env,
    context.benchDir,
    (line) => {
      const event = JSON.parse(line) as LoadEvent;
      if (event.event === 'result') result = event.result;
      onEvent(event);
    },
  );
  if (result === undefined) throw new Error('the load generator printed no result');
  return result;
}

/**
 * The service's command line as `npm start` runs it (`node [flags] dist/src/main.js`, from the
 * service's package.json), as node arguments: the runtime flags users get are the ones measured.
 */
export function serviceStartArgs(serviceRoot: string): string[] {
  const manifest = JSON.parse(fs.readFileSync(path.join(serviceRoot, 'package.json'), 'utf8')) as {
    scripts?: Record<string, string>;
  };
  const start = manifest.scripts?.['start'] ?? '';
  const words = start.trim().split(/\s+/);
  const program = words.at(-1);
  if (words[0] !== 'node' || program === undefined || !program.endsWith('.js')) {
    throw new Error(
      `expected "start": "node [flags] <program>.js" in ${serviceRoot}/package.json, found "${start}"`,
    );
  }
  return [...words.slice(1, -1), path.join(serviceRoot, program)];
}

/** A service over a store of its own, started as users start it, to load from this process. */
export interface StartedService {
  readonly target: SliceTarget;
  /** Stops the service and removes its store. */
  close(): Promise<void>;
}

/** Prepares `store` (with `rows` plants) under `label`, and starts the service of `serviceRoot` over it. */
export async function startServiceOver(options: {
  readonly serviceRoot: string;
  readonly dataDir: string;
  readonly postgresUrl: string;
  readonly cpu: number | null;
  readonly store: StoreName;
  readonly label: string;
  readonly rows: number;
  /** Variables for this service only (e.g. SQLITE_SYNCHRONOUS). */
  readonly env?: Readonly<Record<string, string>>;
}): Promise<StartedService> {
  const prepared = await prepareStore(options.store, {
    serviceRoot: options.serviceRoot,
    dataDir: options.dataDir,
    postgresUrl: options.postgresUrl,
    label: options.label,
    rows: options.rows,
    idOrder: 'scattered',
  });
  try {
    const port = await freePort();
    const server = await startServer({
      cpu: options.cpu,
      args: serviceStartArgs(options.serviceRoot),
      env: serverEnv({ HOST: '127.0.0.1', PORT: String(port), ...prepared.env, ...options.env }),
      port,
      cwd: options.serviceRoot,
      logFile: path.join(options.dataDir, `${options.label}.log`),
    });
    return {
      target: { url: server.url, token: prepared.token, pid: server.pid },
      close: async () => {
        await stopServerAndSettleLog(server, options.label);
        await prepared.dispose();
      },
    };
  } catch (error) {
    await prepared.dispose();
    throw error;
  }
}

/** SQLite FULL ÷ NORMAL under POST load, one server loaded at a time in slices (see slices.ts). */
export interface AlternatedComparison {
  readonly what: string;
  readonly slices: number;
  readonly seconds: number;
  /** FULL's requests ÷ NORMAL's in each slice. */
  readonly perSlice: readonly number[];
  readonly requests: RatioEstimate;
  readonly cpuPerRequest: RatioEstimate;
  /** FULL's p99 latency ÷ NORMAL's. */
  readonly p99: RatioEstimate;
}

/**
 * Serves SQLite NORMAL and FULL side by side, each over a store that starts empty, and loads one
 * at a time in `slices` slices of `seconds` each (NORMAL FULL, then FULL NORMAL, ...): the drift
 * of the machine, which moves the rounds' ratios by a tenth or more, cancels, while each server's
 * waits for the disk count.
 */
export async function measureFullOverNormal(
  context: Context,
  slices: number,
  seconds: number,
): Promise<AlternatedComparison> {
  const started: StartedService[] = [];
  const closeAll = async () => {
    for (const service of started.splice(0)) await service.close();
  };
  cleanups.add(closeAll);
  try {
    for (const store of ['sqlite-normal', 'sqlite-full'] as const) {
      started.push(
        await startServiceOver({
          serviceRoot: context.serviceRoot,
          dataDir: context.dataDir,
          postgresUrl: context.postgresUrl,
          cpu: context.pinning.serverCpu,
          store,
          label: `alternated-${store}`,
          rows: 0,
        }),
      );
    }
    const results = await runSlices({
      targets: [started[0]!.target, started[1]!.target],
      alternate: true,
      slices,
      seconds,
      connections: context.settings.connections,
    });
    return {
      what: 'SQLite FULL ÷ NORMAL, post, alternated',
      slices,
      seconds,
      perSlice: results.requestRatios,
      requests: results.requests,
      cpuPerRequest: results.cpuPerRequest,
      p99: results.p99,
    };
  } finally {
    cleanups.delete(closeAll);
    await closeAll();
  }
}

export async function measureCell(
  cell: Cell,
  round: number,
  context: Context,
  profile?: ProfileRequest,
): Promise<Measurement> {
  const { settings } = context;
  const label = `${cell.id.replace(/[^a-z0-9-]+/gi, '_')}-r${round}`;
  const rowsBefore = rowsFor(cell, context);
  let store: PreparedStore | undefined;
  if (cell.server === 'service') {
    store = await prepareStore(cell.store!, {
      serviceRoot: context.serviceRoot,
      dataDir: context.dataDir,
      postgresUrl: context.postgresUrl,
      label,
      rows: rowsBefore,
      idOrder: settings.idOrder,
    });
  }
  const disposeStore = async () => store?.dispose();
  cleanups.add(disposeStore);
  try {
    const waitedForQuietMs =
      context.quietWaitMs > 0 ? await waitForQuiet(10, context.quietWaitMs) : 0;
    const port = await freePort();
    const program =
      cell.server === 'service'
        ? serviceStartArgs(context.serviceRoot)
        : [
            path.join(
              context.benchDir,
              cell.server === 'node:http' ? 'bare-http.js' : 'bare-express.js',
            ),
          ];
    const nodeFlags =
      profile === undefined
        ? []
        : [
            '--cpu-prof',
            `--cpu-prof-dir=${profile.dir}`,
            `--cpu-prof-interval=${profile.intervalUs}`,
            '--require',
            path.join(context.benchDir, 'probe.js'),
          ];
    const logFile = path.join(context.dataDir, `${label}.log`);
    const server = await startServer({
      cpu: context.pinning.serverCpu,
      args: [...nodeFlags, ...program],
      env: serverEnv({
        HOST: '127.0.0.1',
        PORT: String(port),
        ...(store?.env ?? {}),
        ...(cell.server === 'express-born' ? { BARE_EXPRESS_BORN_PROTOTYPES: '1' } : {}),
        ...(profile === undefined ? {} : { BENCH_PROBE_OUT: profile.probeOut }),
      }),
      port,
      cwd: context.serviceRoot,
      logFile,
    });
    if (profile !== undefined && context.pinning.loaderCpu !== null) {
      if (pinThreads(server.pid, 'v8:ProfEvntProc', context.pinning.loaderCpu) === 0) {
        process.stderr.write(
          'The CPU profiler thread was not found: blocking calls may be over-counted.\n',
        );
      }
    }
    const stop = () => stopServer(server, 2000);
    cleanups.add(stop);
    try {
      let cpuAtStart = cpuMsOf(server.pid);
      let serverCpuMs = NaN;
      let machineAtStart = machineCpu();
      let machine = { processes: NaN, interrupts: NaN, steal: NaN };
      let ownAtStart = process.cpuUsage();
      let ownMs = NaN;
      let databaseAtStart = postgresCpuMs();
      let databaseMs = NaN;
      const load = await runLoader(
        context,
        {
          url: server.url,
          workload: cell.workload,
          token: store?.token ?? 'plnt_bare-servers-ignore-it',
          connections: settings.connections,
          warmupSeconds: settings.warmupSeconds,
          durationSeconds: settings.durationSeconds,
          idOrder: settings.idOrder,
          deletable: cell.rows === 'deletable' ? rowsBefore : 0,
          timeoutSeconds: settings.timeoutSeconds,
        },
        (event) => {
          if (event.event === 'window-start') {
            cpuAtStart = cpuMsOf(server.pid);
            machineAtStart = machineCpu();
            ownAtStart = process.cpuUsage();
            databaseAtStart = postgresCpuMs();
            if (profile !== undefined) server.child.kill('SIGUSR2');
          } else if (event.event === 'window-end') {
            serverCpuMs = cpuMsOf(server.pid) - cpuAtStart;
            machine = cpuSince(machineAtStart);
            databaseMs = postgresCpuMs() - databaseAtStart;
            const own = process.cpuUsage(ownAtStart);
            ownMs = (own.user + own.system) / 1000;
            if (profile !== undefined) server.child.kill('SIGUSR2');
          }
        },
      );
      const { peakMiB } = memoryOf(server.pid);
      const serverExitCode = await stopServerAndSettleLog(server, cell.id);
      const windowMs = settings.durationSeconds * 1000;
      const loaderMs = (load.loaderCpuPercent / 100) * windowMs;
      return {
        cell: cell.id,
        round,
        rowsBefore,
        prefillMs: store?.prefillMs ?? 0,
        startMs: server.startMs,
        peakRssMB: (peakMiB * 1024 * 1024) / 1e6,
        serverCpuPercent: (100 * serverCpuMs) / windowMs,
        otherCpuPercent: Math.max(
          0,
          (100 *
            (machine.processes -
              serverCpuMs -
              loaderMs -
              ownMs -
              (cell.store === 'postgres' ? databaseMs : 0))) /
            windowMs,
        ),
        databaseCpuPercent: cell.store === 'postgres' ? (100 * databaseMs) / windowMs : 0,
        interruptCpuPercent: (100 * machine.interrupts) / windowMs,
        stealCpuPercent: (100 * machine.steal) / windowMs,
        waitedForQuietMs,
        serverExitCode,
        load,
      };
    } finally {
      cleanups.delete(stop);
      if (server.child.exitCode === null && server.child.signalCode === null) await stop();
    }
  } finally {
    cleanups.delete(disposeStore);
    await disposeStore();
  }
}
