import { createTestSchema, describeWithPostgres, type TestSchema } from '../support/postgres';
import { cleanupChildren, tempSqlitePath } from '../support/server-process';
import {
  bearer,
  deletePlant,
  inParallel,
  keepAliveAgent,
  mapLimit,
  send,
  sleep,
  type Answer,
} from './support/http';
import {
  chooseSeed,
  restartService,
  seededRandom,
  startService,
  type Service,
} from './support/service';

/**
 * Crash durability: creates from concurrent clients, SIGKILL at a random (seeded) moment, restart
 * over the same data. Every create answered 200 must be there (its DELETE answers 204); no id whose
 * create answered 4xx, and no id never sent, may be stored. A create whose answer never arrived may
 * go either way and is only counted.
 */

const CLIENTS = 8;

type Outcome = 'acknowledged' | 'rejected' | 'unknown';

interface Totals {
  acknowledged: number;
  rejected: number;
  unknown: number;
  unknownStored: number;
  neverSentProbed: number;
  cyclesSurvived: number;
  lost: string[];
  phantoms: string[];
  unexpected: string[];
}

/** Bodies that the contract rejects, each with the status class it must get. */
const INVALID_CREATES: ReadonlyArray<(id: bigint) => { json: string; contentType: string }> = [
  (id) => ({ json: `{"id": ${id}, "name": ""}`, contentType: 'application/json' }),
  (id) => ({
    json: `{"id": ${id}, "name": "a", "colour": "green"}`,
    contentType: 'application/json',
  }),
  (id) => ({ json: `{"id": ${id}, "name": "a"}`, contentType: 'text/plain' }),
  (id) => ({ json: `{"id": ${id}, "name": "a", "tag": ""}`, contentType: 'application/json' }),
  (id) => ({ json: `{"id": ${id}, "id": ${id}, "name": "a"}`, contentType: 'application/json' }),
  (id) => ({ json: `{"id": ${id}, "name": "a\\u0000"}`, contentType: 'application/json' }),
  (id) => ({ json: `{"id": ${id}.5, "name": "a"}`, contentType: 'application/json' }),
];

async function verifyAfterRestart(
  service: Service,
  outcomes: ReadonlyMap<bigint, Outcome>,
  neverSent: readonly bigint[],
  totals: Totals,
): Promise<void> {
  const agent = keepAliveAgent(CLIENTS);
  try {
    const probes: Array<[bigint, Outcome | 'never-sent']> = [
      ...outcomes.entries(),
      ...neverSent.map((id): [bigint, 'never-sent'] => [id, 'never-sent']),
    ];
    const answers = await mapLimit(probes, CLIENTS, ([id]) =>
      deletePlant(service.target, service.token, id, { agent }),
    );
    probes.forEach(([id, outcome], index) => {
      const status = (answers[index] as Answer).status;
      if (status !== 204 && status !== 404) {
        totals.unexpected.push(`DELETE /plants/${id} after the restart answered ${status}`);
      }
      if (outcome === 'acknowledged' && status !== 204) totals.lost.push(String(id));
      if ((outcome === 'rejected' || outcome === 'never-sent') && status === 204) {
        totals.phantoms.push(`${id} (${outcome})`);
      }
      if (outcome === 'unknown' && status === 204) totals.unknownStored++;
    });
    totals.neverSentProbed += neverSent.length;
  } finally {
    agent.destroy();
  }
}

/** One cycle: a fresh process over the data, CLIENTS loops of creates, SIGKILL after `killAfterMs`. */
async function crashCycle(
  service: Service,
  cycle: number,
  killAfterMs: number,
  random: () => number,
  totals: Totals,
): Promise<Map<bigint, Outcome>> {
  // Ids of this cycle are base + 2k; the odd ones in between are never sent.
  const base = BigInt(cycle + 1) * 1_000_000_000n;
  let nextIndex = 0n;
  let killed = false;
  const outcomes = new Map<bigint, Outcome>();
  const agents = Array.from({ length: CLIENTS }, () => keepAliveAgent(1));
  const counts = { acknowledged: 0, rejected: 0, unknown: 0 };
  const record = (id: bigint, outcome: Outcome) => {
    outcomes.set(id, outcome);
    counts[outcome]++;
  };

  const load = inParallel(CLIENTS, async (loop) => {
    const agent = agents[loop];
    while (!killed) {
      const id = base + 2n * nextIndex++;
      const invalid =
        random() < 0.25
          ? INVALID_CREATES[Math.floor(random() * INVALID_CREATES.length)]
          : undefined;
      const { json, contentType } = invalid?.(id) ?? {
        json: `{"id": ${id}, "name": "plant ${id}", "tag": "cycle ${cycle}"}`,
        contentType: 'application/json',
      };
      let answer: Answer;
      try {
        answer = await send(
          service.target,
          {
            method: 'POST',
            path: '/plants',
            headers: { ...bearer(service.token), 'Content-Type': contentType },
            body: json,
          },
          { agent: agent ?? false, timeoutMs: 5000 },
        );
      } catch {
        // No answer: the create may or may not have been committed before the kill.
        record(id, 'unknown');
        continue;
      }
      if (answer.status === 200) record(id, 'acknowledged');
      else if (answer.status >= 400 && answer.status < 500) record(id, 'rejected');
      else record(id, 'unknown');
      const expected = invalid === undefined ? 200 : 'a 4xx';
      if (
        invalid === undefined ? answer.status !== 200 : answer.status < 400 || answer.status >= 500
      ) {
        totals.unexpected.push(
          `create ${json} (${contentType}) answered ${answer.status}, expected ${expected}`,
        );
      }
    }
  });

  await sleep(killAfterMs);
  killed = true;
  await service.server.kill();
  await load;
  for (const agent of agents) agent.destroy();
  expect(service.server.process.signalCode).toBe('SIGKILL');

  totals.acknowledged += counts.acknowledged;
  totals.rejected += counts.rejected;
  totals.unknown += counts.unknown;
  console.log(
    `cycle ${cycle + 1}: SIGKILL after ${killAfterMs} ms with ${counts.acknowledged} creates acknowledged, ` +
      `${counts.rejected} rejected, ${counts.unknown} without an answer`,
  );
  return outcomes;
}

/** Never-sent ids: the odd neighbours of the cycle's ids, and a few beyond the last one sent. */
function neverSentIds(cycle: number, sent: number, random: () => number, count: number): bigint[] {
  const base = BigInt(cycle + 1) * 1_000_000_000n;
  return Array.from(
    { length: count },
    () => base + 2n * BigInt(Math.floor(random() * (sent + 10))) + 1n,
  );
}

async function runCrashCycles(first: Service, cycles: number, label: string): Promise<Totals> {
  const seed = chooseSeed();
  const random = seededRandom(seed);
  console.log(`crash durability (${label}): seed ${seed} (replay with RELIABILITY_SEED=${seed})`);
  const totals: Totals = {
    acknowledged: 0,
    rejected: 0,
    unknown: 0,
    unknownStored: 0,
    neverSentProbed: 0,
    cyclesSurvived: 0,
    lost: [],
    phantoms: [],
    unexpected: [],
  };
  let service = first;
  for (let cycle = 0; cycle < cycles; cycle++) {
    if (cycle > 0) service = await restartService(service);
    const killAfterMs = 150 + Math.floor(random() * 600);
    const outcomes = await crashCycle(service, cycle, killAfterMs, random, totals);
    const restarted = await restartService(service);
    const lostBefore = totals.lost.length;
    await verifyAfterRestart(
      restarted,
      outcomes,
      neverSentIds(cycle, outcomes.size, random, 50),
      totals,
    );
    if (totals.lost.length === lostBefore) totals.cyclesSurvived++;
    await restarted.server.kill();
    service = restarted;
  }
  console.log(
    `crash durability (${label}): ${cycles} SIGKILL cycles, creates acknowledged ${totals.acknowledged}, ` +
      `rejected ${totals.rejected}, unanswered ${totals.unknown} (${totals.unknownStored} of them stored), ` +
      `never-sent ids probed ${totals.neverSentProbed}, cycles survived ${totals.cyclesSurvived}/${cycles}, ` +
      `acknowledged writes lost ${totals.lost.length}`,
  );
  return totals;
}

function expectNoLoss(totals: Totals, cycles: number): void {
  expect(totals.lost).toEqual([]);
  expect(totals.phantoms).toEqual([]);
  expect(totals.unexpected).toEqual([]);
  expect(totals.cyclesSurvived).toBe(cycles);
  // The kills must land while creates are being acknowledged, or the test proves nothing.
  expect(totals.acknowledged).toBeGreaterThanOrEqual(cycles * 20);
  expect(totals.rejected).toBeGreaterThan(0);
}

afterEach(cleanupChildren);

describe('crash durability under SIGKILL', () => {
  it('loses no acknowledged create and stores nothing rejected or unsent, over 5 kill points (SQLite, SQLITE_SYNCHRONOUS=FULL)', async () => {
    const CYCLES = 5;
    const first = await startService({ sqlitePath: tempSqlitePath() });
    const totals = await runCrashCycles(first, CYCLES, 'SQLite FULL');
    expectNoLoss(totals, CYCLES);
  }, 90_000);
});

let schema: TestSchema | undefined;

describeWithPostgres('crash durability under SIGKILL (PostgreSQL)', () => {
  afterEach(async () => {
    await cleanupChildren();
    await schema?.drop();
    schema = undefined;
  });

  it('loses no committed create when the service is killed, over 3 kill points', async () => {
    const CYCLES = 3;
    schema = await createTestSchema();
    const first = await startService({ env: { DATABASE_URL: schema.url } });
    const totals = await runCrashCycles(first, CYCLES, 'PostgreSQL');
    expectNoLoss(totals, CYCLES);
  }, 90_000);
});
