import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { parseArgs } from 'node:util';
import YAML from 'yaml';
import { findBreakingChanges } from './breaking-changes';
import { node } from './openapi-walk';
import { errorText } from '../../src/error-text';

const USAGE = `Usage: npm run contract:breaking -- [--base REF] [--spec FILE]
Compares FILE (default openapi.yaml) with the same file at REF. Without --base, REF is the newest
release tag reachable from HEAD (v<major>.<minor>.<patch>), or HEAD when there is none.
Fails when a change can break an existing caller, unless info.version's major number went up.`;

function git(args: readonly string[]): string {
  return execFileSync('git', args, {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
    timeout: 10_000,
  });
}

function lastReleaseTag(): string | undefined {
  try {
    return git(['describe', '--tags', '--abbrev=0', '--match', 'v[0-9]*']).trim() || undefined;
  } catch {
    return undefined;
  }
}

function versionOf(doc: Record<string, unknown>): number[] {
  const text = String(node(doc['info'])['version'] ?? '');
  const match = /^(\d+)\.(\d+)\.(\d+)/.exec(text);
  if (match === null) throw new Error(`info.version ${JSON.stringify(text)} is not x.y.z.`);
  return match.slice(1).map(Number);
}

function compareVersions(a: number[], b: number[]): number {
  for (let i = 0; i < 3; i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return 0;
}

function main(argv: string[]): number {
  const { values } = parseArgs({
    args: argv,
    options: { base: { type: 'string' }, spec: { type: 'string' }, help: { type: 'boolean' } },
  });
  if (values.help === true) {
    console.log(USAGE);
    return 0;
  }
  const spec = values.spec ?? 'openapi.yaml';
  const base = values.base ?? lastReleaseTag() ?? 'HEAD';
  const why = values.base !== undefined ? 'given' : base === 'HEAD' ? 'no release tag' : 'last tag';
  let baseText: string;
  try {
    // "REF:./FILE" reads the file relative to the current directory, not the repository root.
    baseText = git(['show', `${base}:./${spec}`]);
  } catch (error) {
    console.error(
      `Cannot read ${spec} at ${base}: ${(error as { stderr?: string }).stderr ?? error}`,
    );
    return 2;
  }
  const before = YAML.parse(baseText) as Record<string, unknown>;
  const after = YAML.parse(fs.readFileSync(spec, 'utf8')) as Record<string, unknown>;
  const [from, to] = [versionOf(before), versionOf(after)];
  console.log(`Comparing ${spec} (${to.join('.')}) with ${base} (${from.join('.')}; ${why}).`);

  if (compareVersions(to, from) < 0) {
    console.error(`info.version went backwards: ${from.join('.')} → ${to.join('.')}.`);
    return 1;
  }
  const breaking = findBreakingChanges(before, after);
  if (breaking.length === 0) {
    console.log('No breaking changes.');
    return 0;
  }
  console.log(
    `${breaking.length} breaking change(s):\n${breaking.map((b) => `  - ${b}`).join('\n')}`,
  );
  if (to[0]! > from[0]!) {
    console.log(`Allowed: info.version's major number went up (${from[0]} → ${to[0]}).`);
    return 0;
  }
  console.error(
    'Breaking changes need a new major info.version (see "Versioning policy" in README).',
  );
  return 1;
}

try {
  process.exitCode = main(process.argv.slice(2));
} catch (error) {
  console.error(`${errorText(error)}\n\n${USAGE}`);
  process.exitCode = 2;
}
