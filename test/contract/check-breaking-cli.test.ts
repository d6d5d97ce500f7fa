import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import YAML from 'yaml';
import { PROJECT_ROOT } from '../support/server-process';
import { loadSpec } from './support/spec';

const CHECK_JS = path.join(PROJECT_ROOT, 'dist', 'scripts', 'contract', 'check-breaking.js');

type Obj = Record<string, Record<string, unknown>>;

let repo: string;

function git(...args: string[]): string {
  return execFileSync(
    'git',
    ['-c', 'user.name=contract test', '-c', 'user.email=test@invalid', ...args],
    { cwd: repo, encoding: 'utf8', timeout: 10_000 },
  );
}

/** The project's contract at version 1.0.0 (whatever its own version), edited. */
function writeSpec(edit: (doc: Obj) => void = () => undefined): void {
  const doc = loadSpec() as Obj;
  doc['info']!['version'] = '1.0.0';
  edit(doc);
  fs.writeFileSync(path.join(repo, 'openapi.yaml'), YAML.stringify(doc));
}

function check(...args: string[]): { code: number | null; output: string } {
  const result = spawnSync(process.execPath, [CHECK_JS, ...args], {
    cwd: repo,
    encoding: 'utf8',
    timeout: 20_000,
  });
  return { code: result.status, output: result.stdout + result.stderr };
}

const removeReadyz = (doc: Obj) => delete doc['paths']!['/readyz'];
const version = (v: string) => (doc: Obj) => (doc['info']!['version'] = v);

beforeEach(() => {
  repo = fs.mkdtempSync(path.join(os.tmpdir(), 'plant-store-breaking-'));
  git('init', '-q');
  writeSpec();
  git('add', 'openapi.yaml');
  git('commit', '-qm', 'v1');
});

afterEach(() => fs.rmSync(repo, { recursive: true, force: true }));

describe('npm run contract:breaking', () => {
  it('compares with HEAD when there is no release tag, and passes a compatible edit', () => {
    writeSpec((doc) => (doc['info']!['description'] = 'Reworded.'));

    const { code, output } = check();

    expect(output).toContain('with HEAD (1.0.0; no release tag)');
    expect(output).toContain('No breaking changes.');
    expect(code).toBe(0);
  });

  it('fails on a breaking edit and names it', () => {
    writeSpec(removeReadyz);

    const { code, output } = check();

    expect(output).toContain('- GET /readyz: operation removed');
    expect(output).toContain('Breaking changes need a new major info.version');
    expect(code).toBe(1);
  });

  it('allows a breaking edit when the major version goes up', () => {
    writeSpec((doc) => {
      removeReadyz(doc);
      version('2.0.0')(doc);
    });

    const { code, output } = check();

    expect(output).toContain("Allowed: info.version's major number went up (1 → 2).");
    expect(code).toBe(0);
  });

  it('compares with the newest release tag, not HEAD, when there is one', () => {
    git('tag', 'v1.0.0');
    writeSpec(removeReadyz);
    git('commit', '-qam', 'breaking, committed');

    const { code, output } = check();

    expect(output).toContain('with v1.0.0 (1.0.0; last tag)');
    expect(output).toContain('- GET /readyz: operation removed');
    expect(code).toBe(1);
  });

  it('compares with the ref given by --base', () => {
    writeSpec(removeReadyz);
    git('commit', '-qam', 'breaking, committed');

    const { code, output } = check('--base', 'HEAD~1');

    expect(output).toContain('with HEAD~1 (1.0.0; given)');
    expect(code).toBe(1);
  });

  it('fails when info.version goes backwards', () => {
    writeSpec(version('0.9.0'));

    const { code, output } = check();

    expect(output).toContain('info.version went backwards: 1.0.0 → 0.9.0.');
    expect(code).toBe(1);
  });

  it('fails with status 2 when the base has no such file', () => {
    const { code, output } = check('--base', 'HEAD', '--spec', 'missing.yaml');

    expect(output).toContain('Cannot read missing.yaml at HEAD');
    expect(code).toBe(2);
  });
});
