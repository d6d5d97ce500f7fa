import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';

/**
 * `npm run contract`: every contract check in turn, each bounded in time, then a summary. Extra
 * arguments (`-- --base REF`) go to the breaking-change check. Exits 1 when any step failed.
 */
interface Step {
  readonly name: string;
  readonly command: string;
  readonly args: readonly string[];
  readonly timeoutMs: number;
}

const bin = (tool: string) => path.resolve('node_modules', '.bin', tool);
const script = (name: string) => path.resolve('dist', 'scripts', 'contract', `${name}.js`);

const STEPS: readonly Step[] = [
  {
    name: 'lint (Redocly, Spectral)',
    command: process.execPath,
    args: [script('lint-spec')],
    timeoutMs: 120_000,
  },
  {
    name: 'generated types up to date',
    command: bin('openapi-typescript'),
    args: ['openapi.yaml', '-o', 'generated/openapi.d.ts', '--check'],
    timeoutMs: 60_000,
  },
  {
    name: 'generated client up to date',
    command: process.execPath,
    args: [script('generate-clients'), '--check'],
    timeoutMs: 120_000,
  },
  {
    name: 'breaking changes',
    command: process.execPath,
    args: [script('check-breaking'), ...process.argv.slice(2)],
    timeoutMs: 30_000,
  },
  {
    // Examples, the /docs page in Chromium, both generated clients and the Prism conformance run.
    name: 'contract tests',
    command: bin('jest'),
    args: ['test/contract', '--selectProjects', 'sqlite'],
    timeoutMs: 600_000,
  },
];

let running: ChildProcess | undefined;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    if (running?.pid !== undefined) process.kill(-running.pid, 'SIGKILL');
    process.exit(1);
  });
}

/** Runs one step in its own process group, so that a timeout also stops what it started. */
function runStep(step: Step): Promise<boolean> {
  return new Promise((resolve) => {
    const child = spawn(step.command, step.args, { stdio: 'inherit', detached: true });
    running = child;
    const timer = setTimeout(() => {
      console.log(`::: ${step.name}: stopped after ${step.timeoutMs / 1000} s`);
      process.kill(-child.pid!, 'SIGKILL');
    }, step.timeoutMs);
    child.once('error', (error) => {
      clearTimeout(timer);
      console.log(`::: ${step.name}: ${error.message}`);
      resolve(false);
    });
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve(code === 0);
    });
  });
}

async function main(): Promise<void> {
  const results: { name: string; ok: boolean; seconds: string }[] = [];
  const started = Date.now();
  for (const step of STEPS) {
    console.log(`\n::: ${step.name}`);
    const began = Date.now();
    const ok = await runStep(step);
    results.push({ name: step.name, ok, seconds: ((Date.now() - began) / 1000).toFixed(1) });
  }
  console.log('\nContract checks:');
  for (const { name, ok, seconds } of results) {
    console.log(`  ${ok ? 'ok    ' : 'FAILED'} ${name} (${seconds} s)`);
  }
  const failed = results.filter((r) => !r.ok).length;
  const total = ((Date.now() - started) / 1000).toFixed(1);
  console.log(`${results.length - failed} passed, ${failed} failed in ${total} s`);
  process.exitCode = failed === 0 ? 0 : 1;
}

void main();
