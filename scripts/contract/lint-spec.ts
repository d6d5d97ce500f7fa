import { spawnSync } from 'node:child_process';
import path from 'node:path';

const BIN = path.resolve('node_modules', '.bin');
const SPEC = 'openapi.yaml';

interface Problem {
  readonly severity: 'error' | 'warning';
  readonly text: string;
}

/** Runs a linter from node_modules/.bin (npm runs scripts in the project root) for its stdout. */
function run(tool: string, args: readonly string[], emptyOk = false): string {
  const result = spawnSync(path.join(BIN, tool), args, {
    encoding: 'utf8',
    timeout: 120_000,
    env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
  });
  if (result.error !== undefined) throw result.error;
  if (result.stdout.trim() === '' && !emptyOk)
    throw new Error(`${tool} printed nothing:\n${result.stderr}`);
  return result.stdout;
}

/** Redocly CLI with the project's redocly.yaml (recommended plus stricter rules). */
function redocly(): Problem[] {
  const report = JSON.parse(run('redocly', ['lint', SPEC, '--format=json'])) as {
    problems: {
      ruleId: string;
      severity: string;
      message: string;
      location: { pointer?: string }[];
    }[];
  };
  return report.problems.map((p) => ({
    severity: p.severity === 'error' ? 'error' : 'warning',
    text: `${p.ruleId} ${p.location[0]?.pointer ?? ''}: ${p.message}`,
  }));
}

/** Spectral with .spectral.yaml (spectral:oas). Infos and hints are not counted. */
function spectral(): Problem[] {
  const output = run(
    'spectral',
    ['lint', SPEC, '--ruleset', '.spectral.yaml', '-f', 'json', '-q'],
    true,
  );
  const results = JSON.parse(output.trim() === '' ? '[]' : output) as {
    code: string;
    severity: number;
    message: string;
    path: string[];
  }[];
  return results
    .filter((r) => r.severity <= 1)
    .map((r) => ({
      severity: r.severity === 0 ? 'error' : 'warning',
      text: `${r.code} ${r.path.join('.')}: ${r.message}`,
    }));
}

let failed = false;
for (const [name, lint] of [
  ['Redocly', redocly],
  ['Spectral', spectral],
] as const) {
  const problems = lint();
  const errors = problems.filter((p) => p.severity === 'error').length;
  console.log(`${name}: ${errors} errors, ${problems.length - errors} warnings`);
  for (const problem of problems) console.log(`  ${problem.severity} ${problem.text}`);
  failed ||= problems.length > 0;
}
process.exitCode = failed ? 1 : 0;
