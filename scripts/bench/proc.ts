/** Processes for the benchmark: pinned spawning, start-up timing, /proc sampling, stopping. */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { performance } from 'node:perf_hooks';

export interface Pinning {
  /** null: run unpinned (no taskset, or fewer than two cores). */
  readonly serverCpu: number | null;
  readonly loaderCpu: number | null;
}

/** argv for `node ...args` on `cpu`, through taskset (which execs node, so the pid is node's). */
export function pinnedNode(cpu: number | null, args: readonly string[]): [string, string[]] {
  return cpu === null
    ? [process.execPath, [...args]]
    : ['taskset', ['-c', String(cpu), process.execPath, ...args]];
}

/** Pins this process (every thread) to `cpu`, so the orchestrator stays off the server's core. */
export function pinSelf(cpu: number): void {
  execFileSync('taskset', ['-a', '-p', '-c', String(cpu), String(process.pid)], {
    stdio: 'ignore',
  });
}

export function hasTaskset(): boolean {
  try {
    execFileSync('taskset', ['-V'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** A port that was free a moment ago on 127.0.0.1. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** The last lines of a log file, for messages when a process fails. */
export function tailOf(file: string, lines = 40): string {
  try {
    // Only the end is read: a service's log holds a line per request, over 100 MB in a long run.
    const fd = fs.openSync(file, 'r');
    try {
      const size = fs.fstatSync(fd).size;
      const tail = Buffer.alloc(Math.min(size, 64 * 1024));
      fs.readSync(fd, tail, 0, tail.length, size - tail.length);
      return tail.toString('utf8').trimEnd().split('\n').slice(-lines).join('\n');
    } finally {
      fs.closeSync(fd);
    }
  } catch {
    return '';
  }
}

export interface RunningServer {
  readonly child: ChildProcess;
  readonly pid: number;
  readonly url: string;
  /** From spawning the process to the first 200 answer to GET /healthz, in ms. */
  readonly startMs: number;
  /** Where its stdout and stderr go (a file, so that reading them costs the load generator's core nothing). */
  readonly logFile: string;
  readonly exited: Promise<number | null>;
}

function getStatus(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.setTimeout(2000, () => req.destroy(new Error('timeout')));
  });
}

/**
 * Starts `node args` pinned to `cpu` with `env`, listening on `port`, and polls GET /healthz every
 * 2 ms until it answers 200: the time from spawn to that answer is the start-up time.
 */
export async function startServer(options: {
  readonly cpu: number | null;
  readonly args: readonly string[];
  readonly env: NodeJS.ProcessEnv;
  readonly port: number;
  readonly cwd: string;
  readonly logFile: string;
  readonly timeoutMs?: number;
}): Promise<RunningServer> {
  const url = `http://127.0.0.1:${options.port}`;
  const [command, args] = pinnedNode(options.cpu, options.args);
  const log = fs.openSync(options.logFile, 'w');
  const started = performance.now();
  const child = spawn(command, args, {
    cwd: options.cwd,
    env: options.env,
    stdio: ['ignore', log, log],
  });
  fs.closeSync(log);
  let exitCode: number | null | undefined;
  let exitSignal: NodeJS.Signals | null = null;
  const exited = new Promise<number | null>((resolve) => {
    child.once('exit', (code, signal) => {
      exitCode = code;
      exitSignal = signal;
      resolve(code);
    });
    child.once('error', () => resolve(-1));
  });
  const deadline = started + (options.timeoutMs ?? 30_000);
  for (;;) {
    if (exitCode !== undefined) {
      throw new Error(
        `the server exited (code ${exitCode}, signal ${exitSignal}) before answering:\n${tailOf(options.logFile)}`,
      );
    }
    try {
      if ((await getStatus(`${url}/healthz`)) === 200) break;
    } catch {
      // Not listening yet.
    }
    if (performance.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(
        `the server did not answer GET /healthz in time:\n${tailOf(options.logFile)}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  const startMs = performance.now() - started;
  if (child.pid === undefined) throw new Error('the server has no pid');
  return { child, pid: child.pid, url, startMs, logFile: options.logFile, exited };
}

/** SIGTERM, then SIGKILL after `graceMs`; resolves with the exit code. */
export async function stopServer(server: RunningServer, graceMs = 10_000): Promise<number | null> {
  if (server.child.exitCode !== null) return server.child.exitCode;
  server.child.kill('SIGTERM');
  const timer = setTimeout(() => server.child.kill('SIGKILL'), graceMs);
  try {
    return await server.exited;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Stops a server and settles its log: removed when the server exited cleanly, kept and its end
 * printed when not. Returns the exit code.
 */
export async function stopServerAndSettleLog(
  server: RunningServer,
  name: string,
): Promise<number | null> {
  const exitCode = await stopServer(server);
  if (exitCode === 0) {
    fs.rmSync(server.logFile, { force: true });
  } else {
    process.stderr.write(
      `${name}: the server exited with ${exitCode} (its log: ${server.logFile}):\n${tailOf(server.logFile)}\n`,
    );
  }
  return exitCode;
}

/** Peak resident set (VmHWM) and current RSS of a live process, in MiB. */
export function memoryOf(pid: number): { peakMiB: number; rssMiB: number } {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string) =>
    Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
  return { peakMiB: kib('VmHWM') / 1024, rssMiB: kib('VmRSS') / 1024 };
}

let clockTicks: number | undefined;

/** CPU time (user + system) a live process has used so far, in ms. */
export function cpuMsOf(pid: number): number {
  clockTicks ??= Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces) start at field 3; utime, stime are 14, 15.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / clockTicks;
}

/**
 * Runs `node args` pinned to `cpu`; calls `onLine` with each stdout line as it comes and resolves
 * with the whole stdout; rejects with its stderr when it fails.
 */
export function runNode(
  cpu: number | null,
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  cwd: string,
  onLine?: (line: string) => void,
): Promise<string> {
  const [command, argv] = pinnedNode(cpu, args);
  return new Promise((resolve, reject) => {
    const child = spawn(command, argv, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let pending = '';
    const stderr: Buffer[] = [];
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk: string) => {
      stdout += chunk;
      if (onLine === undefined) return;
      pending += chunk;
      let newline;
      while ((newline = pending.indexOf('\n')) >= 0) {
        onLine(pending.slice(0, newline));
        pending = pending.slice(newline + 1);
      }
    });
    child.stderr.on('data', (chunk: Buffer) => stderr.push(chunk));
    child.once('error', reject);
    child.once('close', (code) => {
      if (code === 0) resolve(stdout);
      else
        reject(
          new Error(
            `${args.join(' ')} exited with ${code}:\n${Buffer.concat(stderr).toString('utf8')}${stdout}`,
          ),
        );
    });
  });
}

/** The file system type of `dir`, to warn when fsync would be a no-op (tmpfs). */
export function isTmpfs(dir: string): boolean {
  const TMPFS_MAGIC = 0x01021994;
  try {
    return fs.statfsSync(dir).type === TMPFS_MAGIC;
  } catch {
    return false;
  }
}

/**
 * The file system that holds `dir`, for the run's machine line: its type, its device and, for
 * ext4, whether it has a journal. Without one, every fdatasync also writes the file's inode, whose
 * ctime and i_version change with each write: a third synchronous I/O in many of SQLite FULL's
 * commits, though one that did not measurably move FULL ÷ NORMAL (the record's "Durability"). A
 * run's figures depend on its file system, so the line says which. Undefined where /proc does not
 * tell.
 */
export function fileSystemOf(dir: string): string | undefined {
  try {
    const holder = mountOf(dir);
    if (holder === undefined) return undefined;
    if (holder.type !== 'ext4') return `${holder.type} (${holder.source})`;
    const journal = hasJournal(holder.device);
    const which = journal === undefined ? '' : journal ? ' with a journal' : ' without a journal';
    return `ext4${which} (${holder.source})`;
  } catch {
    return undefined;
  }
}

interface Mount {
  readonly point: string;
  /** major:minor of its block device. */
  readonly device: string;
  readonly type: string;
  readonly source: string;
}

/** The mount that holds `dir`, from /proc/self/mountinfo: the longest mount point above it. */
function mountOf(dir: string): Mount | undefined {
  const target = fs.realpathSync(dir);
  let holder: Mount | undefined;
  for (const line of fs.readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    // id parent major:minor root point options [optional...] - type source super-options
    const [mount, fileSystem] = line.split(' - ');
    const [, , device, , escapedPoint] = mount?.split(' ') ?? [];
    const [type, source] = fileSystem?.split(' ') ?? [];
    if (!device || !escapedPoint || !type || !source) continue;
    const point = escapedPoint.replace(/\\([0-7]{3})/g, (_, octal: string) =>
      String.fromCharCode(parseInt(octal, 8)),
    );
    const inside = point === '/' || target === point || target.startsWith(`${point}/`);
    if (inside && (holder === undefined || point.length >= holder.point.length)) {
      holder = { point, device, type, source };
    }
  }
  return holder;
}

/**
 * The CPUs that have taken the interrupts of the disk holding `dir` since boot (each with at least
 * a tenth of them), most first: the counts of /proc/interrupts over the MSI vectors of the disk's
 * PCI device. Under SQLite FULL each sync ends in such an interrupt, whose handling takes the core
 * it lands on from whatever runs there. Undefined where /sys does not tell (tmpfs, no MSI).
 */
export function diskInterruptCpus(dir: string): number[] | undefined {
  try {
    const holder = mountOf(dir);
    if (holder === undefined) return undefined;
    let block = fs.realpathSync(`/sys/dev/block/${holder.device}`);
    // A partition's directory sits inside its disk's.
    if (fs.existsSync(path.join(block, 'partition'))) block = path.dirname(block);
    let device = fs.realpathSync(path.join(block, 'device'));
    while (!fs.existsSync(path.join(device, 'msi_irqs'))) {
      const parent = path.dirname(device);
      if (!parent.startsWith('/sys/devices/')) return undefined;
      device = parent;
    }
    const vectors = new Set(fs.readdirSync(path.join(device, 'msi_irqs')));
    const [header = '', ...lines] = fs.readFileSync('/proc/interrupts', 'utf8').split('\n');
    const totals = header
      .trim()
      .split(/\s+/)
      .map(() => 0);
    for (const line of lines) {
      const [irq = '', ...counts] = line.trim().split(/\s+/);
      if (!vectors.has(irq.replace(':', ''))) continue;
      for (let cpu = 0; cpu < totals.length; cpu++) totals[cpu]! += Number(counts[cpu]) || 0;
    }
    const all = totals.reduce((sum, count) => sum + count, 0);
    if (all === 0) return undefined;
    return totals
      .map((count, cpu) => ({ count, cpu }))
      .filter(({ count }) => count >= all / 10)
      .sort((a, b) => b.count - a.count)
      .map(({ cpu }) => cpu);
  } catch {
    return undefined;
  }
}

let cpuInfoFields: Map<string, string> | undefined;

/** The first processor's lines of /proc/cpuinfo, by field name (read once); empty where there is none. */
function cpuInfo(): Map<string, string> {
  if (cpuInfoFields !== undefined) return cpuInfoFields;
  const fields = new Map<string, string>();
  cpuInfoFields = fields;
  try {
    const [first = ''] = fs.readFileSync('/proc/cpuinfo', 'utf8').split('\n\n');
    for (const line of first.split('\n')) {
      const colon = line.indexOf(':');
      if (colon > 0) fields.set(line.slice(0, colon).trim(), line.slice(colon + 1).trim());
    }
  } catch {
    // No /proc: the machine line says less.
  }
  return fields;
}

/**
 * The x86 CPU's family and model ("family 26, model 2"), which tell apart hosts whose CPUs are all
 * named alike ("AMD EPYC"). Undefined where /proc/cpuinfo does not give them.
 */
export function cpuFamilyModel(): string | undefined {
  const fields = cpuInfo();
  const family = fields.get('cpu family');
  const model = fields.get('model');
  return family === undefined || model === undefined
    ? undefined
    : `family ${family}, model ${model}`;
}

/**
 * "PTI without PCID" (or "PTI with PCID") when the kernel isolates its page tables from user
 * space's, its mitigation of Meltdown: then every entry into the kernel (a system call, an
 * interrupt) changes page tables, and without the CPU's PCID each change empties the TLB, which
 * the code that runs next refills. A request's system calls cost more there, and so do the
 * wake-ups and interrupts of SQLite FULL's syncs (the record's "Durability"). Undefined when the kernel
 * does not isolate them, or does not say.
 */
export function pageTableIsolation(): string | undefined {
  try {
    const meltdown = fs.readFileSync('/sys/devices/system/cpu/vulnerabilities/meltdown', 'utf8');
    if (!/\bPTI\b/.test(meltdown)) return undefined;
  } catch {
    return undefined;
  }
  const flags = (cpuInfo().get('flags') ?? '').split(' ');
  return flags.includes('pcid') ? 'PTI with PCID' : 'PTI without PCID';
}

/** Whether the ext4 file system on block device `majorMinor` (254:0) has a journal, if /sys tells. */
function hasJournal(majorMinor: string): boolean | undefined {
  try {
    // jbd2 names each journal after its block device (vda-8, dm-0-8).
    const deviceName = path.basename(fs.realpathSync(`/sys/dev/block/${majorMinor}`));
    return fs.existsSync(`/proc/fs/jbd2/${deviceName}-8`);
  } catch {
    return undefined;
  }
}

/** The whole machine's CPU time so far (all cores), in ms, from /proc/stat. */
export interface MachineCpu {
  /** user + nice + system: processes, this one and the ones it runs included. */
  readonly processes: number;
  /** Hardware and software interrupts (loopback TCP is partly here). */
  readonly interrupts: number;
  /** Time the hypervisor gave this machine's CPUs to someone else. */
  readonly steal: number;
}

export function machineCpu(): MachineCpu {
  clockTicks ??= Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;
  const line = fs.readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!;
  // cpu user nice system idle iowait irq softirq steal guest guest_nice
  const [user = 0, nice = 0, system = 0, , , irq = 0, softirq = 0, steal = 0] = line
    .trim()
    .split(/\s+/)
    .slice(1)
    .map(Number);
  const ms = (ticks: number) => (ticks * 1000) / clockTicks!;
  return { processes: ms(user + nice + system), interrupts: ms(irq + softirq), steal: ms(steal) };
}

export function cpuSince(before: MachineCpu): MachineCpu {
  const now = machineCpu();
  return {
    processes: now.processes - before.processes,
    interrupts: now.interrupts - before.interrupts,
    steal: now.steal - before.steal,
  };
}

/**
 * Waits until the machine is quiet (other processes use less than `thresholdPercent` of one core
 * over half a second), at most `maxMs`; resolves with how long it waited, or -1 if it gave up.
 */
export async function waitForQuiet(thresholdPercent: number, maxMs: number): Promise<number> {
  const started = performance.now();
  for (;;) {
    const before = machineCpu();
    const own = process.cpuUsage();
    await new Promise((resolve) => setTimeout(resolve, 500));
    const ownMs = (() => {
      const used = process.cpuUsage(own);
      return (used.user + used.system) / 1000;
    })();
    const otherPercent = ((cpuSince(before).processes - ownMs) / 500) * 100;
    const waited = performance.now() - started;
    if (otherPercent < thresholdPercent) return waited < 600 ? 0 : waited;
    if (waited > maxMs) return -1;
  }
}

/** CPU time so far of every PostgreSQL server process on this machine (comm "postgres"), in ms. */
export function postgresCpuMs(): number {
  clockTicks ??= Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;
  let ticks = 0;
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')) !== 'postgres') continue;
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(fields[11]) + Number(fields[12]);
    } catch {
      // The process ended meanwhile.
    }
  }
  return (ticks * 1000) / clockTicks;
}

/**
 * Moves the threads of `pid` named `comm` to `cpu`; returns how many. The CPU profiler's sampling
 * thread (v8:ProfEvntProc) must not share the server's core: there it can only sample when the
 * main thread blocks, so time in blocking calls (fsync) would be over-counted.
 */
export function pinThreads(pid: number, comm: string, cpu: number): number {
  let moved = 0;
  for (const task of fs.readdirSync(`/proc/${pid}/task`)) {
    try {
      if (fs.readFileSync(`/proc/${pid}/task/${task}/comm`, 'utf8').trim() !== comm) continue;
      execFileSync('taskset', ['-p', '-c', String(cpu), task], { stdio: 'ignore' });
      moved++;
    } catch {
      // The thread ended meanwhile.
    }
  }
  return moved;
}
