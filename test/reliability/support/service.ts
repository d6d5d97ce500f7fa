import {
  developmentTokens,
  startServer,
  tempSqlitePath,
  type ChildEnv,
  type RunningServer,
} from '../../support/server-process';
import { targetOf, type Target } from './http';

/** A running server process with the token to call it with. */
export interface Service {
  readonly server: RunningServer;
  readonly target: Target;
  readonly token: string;
  readonly sqlitePath: string;
  readonly env: ChildEnv;
}

export interface ServiceOptions {
  /** Reuse a database file (a restart); a fresh one by default. */
  readonly sqlitePath?: string;
  readonly env?: ChildEnv;
  /** The token of an earlier start over the same data; a first start prints a development one. */
  readonly token?: string;
}

/** Starts `node dist/src/main.js` (see test/support/server-process.ts) and finds its token. */
export async function startService(options: ServiceOptions = {}): Promise<Service> {
  const sqlitePath = options.sqlitePath ?? tempSqlitePath();
  const env = options.env ?? {};
  const server = await startServer({ sqlitePath, env });
  const token = options.token ?? developmentTokens(server.output())[0];
  if (token === undefined) {
    await server.kill();
    throw new Error(`The first start printed no development token:\n${server.output()}`);
  }
  return { server, target: targetOf(server.baseUrl), token, sqlitePath, env };
}

/** Starts the same service again over the same data (after a kill or a stop). */
export function restartService(previous: Service): Promise<Service> {
  return startService({
    sqlitePath: previous.sqlitePath,
    env: previous.env,
    token: previous.token,
  });
}

/** A small seeded PRNG (mulberry32), so random choices can be replayed from a logged seed. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** RELIABILITY_SEED when set (to replay a run), otherwise a fresh one; logged by the caller. */
export function chooseSeed(): number {
  const fixed = process.env['RELIABILITY_SEED'];
  if (fixed !== undefined && /^\d+$/.test(fixed)) return Number(fixed) >>> 0;
  return Math.floor(Math.random() * 2 ** 31);
}
