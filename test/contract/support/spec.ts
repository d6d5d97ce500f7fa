import fs from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import type { Node } from '../../../scripts/contract/openapi-walk';
import { PROJECT_ROOT } from '../../support/server-process';

export const SPEC_PATH = path.join(PROJECT_ROOT, 'openapi.yaml');

/** The contract as plain JSON (integers beyond 2^53 rounded, as any JSON Schema validator sees them). */
export function loadSpec(): Node {
  return YAML.parse(fs.readFileSync(SPEC_PATH, 'utf8')) as Node;
}

/** `A` and `B` are the same type; `const ok: Same<A, B> = true` fails to compile otherwise. */
export type Same<A, B> =
  (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
