import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** swagger-typescript-api's client, generated from openapi.yaml; never edited by hand. */
const TARGET = path.join('test', 'contract', 'generated', 'plant-store-api.ts');
const ARGS = [
  'generate',
  '--path',
  'openapi.yaml',
  '--name',
  path.basename(TARGET),
  '--sort-types',
];

function generate(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'plant-store-client-'));
  try {
    const bin = path.resolve('node_modules', '.bin', 'swagger-typescript-api');
    const result = spawnSync(bin, [...ARGS, '--output', dir, '--silent'], {
      encoding: 'utf8',
      timeout: 120_000,
    });
    if (result.status !== 0) {
      throw new Error(`swagger-typescript-api failed:\n${result.stdout}${result.stderr}`);
    }
    return fs.readFileSync(path.join(dir, path.basename(TARGET)), 'utf8');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const check = process.argv.includes('--check');
const generated = generate();
const current = fs.existsSync(TARGET) ? fs.readFileSync(TARGET, 'utf8') : undefined;
if (check) {
  if (generated !== current) {
    console.error(`${TARGET} is not what openapi.yaml generates: run npm run generate:clients.`);
    process.exitCode = 1;
  } else {
    console.log(`${TARGET} is up to date.`);
  }
} else {
  fs.mkdirSync(path.dirname(TARGET), { recursive: true });
  fs.writeFileSync(TARGET, generated);
  console.log(`Wrote ${TARGET}.`);
}
