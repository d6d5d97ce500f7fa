import { performance } from 'node:perf_hooks';
import { createTestSchema, describeWithPostgres, type TestSchema } from '../support/postgres';
import { cleanupChildren } from '../support/server-process';
import { createPlant, deletePlant, inParallel, keepAliveAgent, mapLimit } from './support/http';
import { linearize, type RegisterOp } from './support/linearizability';
import { chooseSeed, seededRandom, startService, type Service } from './support/service';

/**
 * Mixed concurrent creates and deletes over a few ids: afterwards the store must agree with the
 * answers. Per id, the answers must be linearizable as a present/absent register (the 200s and 204s
 * alternate, every 409 falls where the plant was there and every 404 where it was not), and the
 * final state found by a DELETE probe must be the one the answers imply.
 */

const IDS: readonly bigint[] = [
  1n,
  2n,
  3n,
  -1n,
  0n,
  9007199254740993n,
  9223372036854775807n,
  -9223372036854775808n,
];

interface Recorded extends RegisterOp {
  readonly id: bigint;
  readonly status: number;
}

async function runMixedLoad(
  service: Service,
  operations: number,
  inFlight: number,
  label: string,
): Promise<void> {
  const seed = chooseSeed();
  const random = seededRandom(seed);
  const plan = Array.from({ length: operations }, () => ({
    id: IDS[Math.floor(random() * IDS.length)] as bigint,
    kind: random() < 0.5 ? ('create' as const) : ('delete' as const),
  }));
  const agent = keepAliveAgent(inFlight);
  const history: Recorded[] = [];
  const unexpected: string[] = [];
  let next = 0;
  const started = performance.now();
  try {
    await inParallel(inFlight, async () => {
      while (next < plan.length) {
        const { id, kind } = plan[next++] as (typeof plan)[number];
        const start = performance.now();
        const answer =
          kind === 'create'
            ? await createPlant(service.target, service.token, `{"id": ${id}, "name": "p${id}"}`, {
                agent,
              })
            : await deletePlant(service.target, service.token, id, { agent });
        const end = performance.now();
        const expected = kind === 'create' ? [200, 409] : [204, 404];
        if (!expected.includes(answer.status)) {
          unexpected.push(`${kind} ${id} answered ${answer.status}: ${answer.body.toString()}`);
        }
        history.push({
          id,
          kind,
          status: answer.status,
          succeeded: answer.status === 200 || answer.status === 204,
          start,
          end,
        });
      }
    });
    const elapsedMs = performance.now() - started;

    const perId = IDS.map((id) => {
      const ops = history.filter((op) => op.id === id);
      const created = ops.filter((op) => op.status === 200).length;
      const deleted = ops.filter((op) => op.status === 204).length;
      return { id, ops, created, deleted, linear: linearize(ops, false) };
    });
    // The probe: DELETE answers 204 exactly when the answers left the plant in place.
    const probes = await mapLimit(IDS, IDS.length, (id) =>
      deletePlant(service.target, service.token, id, { agent }),
    );

    console.log(
      `concurrency (${label}, seed ${seed}): ${operations} operations, ${inFlight} in flight, ` +
        `${IDS.length} ids, ${Math.round(elapsedMs)} ms (${Math.round((operations / elapsedMs) * 1000)}/s); ` +
        perId.map(({ id, created, deleted }) => `${id}: ${created}×200 ${deleted}×204`).join(', '),
    );

    expect(unexpected).toEqual([]);
    perId.forEach(({ id, created, deleted, linear }, index) => {
      const difference = created - deleted;
      const probe = (probes[index] as { status: number }).status;
      expect({ id, difference: [0, 1].includes(difference) }).toEqual({ id, difference: true });
      expect({ id, linearizable: linear.ok }).toEqual({ id, linearizable: true });
      expect({ id, probe }).toEqual({ id, probe: difference === 1 ? 204 : 404 });
      if (linear.ok) expect({ id, final: linear.final }).toEqual({ id, final: difference === 1 });
    });
    // Every id saw real contention, or the test would prove little.
    for (const { created, deleted } of perId) expect(created + deleted).toBeGreaterThan(10);
  } finally {
    agent.destroy();
  }
}

afterEach(cleanupChildren);

describe('the linearizability check itself', () => {
  const op = (
    kind: 'create' | 'delete',
    succeeded: boolean,
    start: number,
    end: number,
  ): RegisterOp => ({ kind, succeeded, start, end });

  it('accepts overlapping answers that some order explains', () => {
    // The delete overlaps the second create, so create, delete, create is possible.
    const history = [op('create', true, 0, 1), op('create', true, 2, 5), op('delete', true, 3, 4)];
    expect(linearize(history, false)).toEqual({ ok: true, final: true });
    expect(linearize([op('create', false, 0, 3), op('create', true, 1, 2)], false)).toEqual({
      ok: true,
      final: true,
    });
  });

  it('rejects answers no order explains', () => {
    // Two creates answered 200 one after the other, with no delete between them.
    expect(linearize([op('create', true, 0, 1), op('create', true, 2, 3)], false).ok).toBe(false);
    // A 409 that finished before any create started.
    expect(linearize([op('create', false, 0, 1), op('create', true, 2, 3)], false).ok).toBe(false);
    // A 404 after a successful create, with no delete in between.
    expect(linearize([op('create', true, 0, 1), op('delete', false, 2, 3)], false).ok).toBe(false);
  });
});

describe('mixed concurrent creates and deletes over 8 ids', () => {
  it('leave the store agreeing with the answers (SQLite): 2000 operations, 32 in flight', async () => {
    const service = await startService();
    await runMixedLoad(service, 2000, 32, 'SQLite');
    expect(service.server.process.exitCode).toBeNull();
  }, 60_000);
});

let schema: TestSchema | undefined;

describeWithPostgres('mixed concurrent creates and deletes over 8 ids (PostgreSQL)', () => {
  afterEach(async () => {
    await cleanupChildren();
    await schema?.drop();
    schema = undefined;
  });

  it('leave the store agreeing with the answers: 2000 operations, 32 in flight', async () => {
    schema = await createTestSchema();
    const service = await startService({ env: { DATABASE_URL: schema.url } });
    await runMixedLoad(service, 2000, 32, 'PostgreSQL');
  }, 60_000);
});
