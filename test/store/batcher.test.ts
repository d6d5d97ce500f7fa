import fs from 'node:fs';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { createBatcher } from '../../src/store/batcher';

/** A statement that answers each input doubled, once `answer()` is called for its batch. */
function controlledStatement() {
  const batches: number[][] = [];
  const answers: ((error?: Error) => void)[] = [];
  const run = (inputs: readonly number[]) => {
    batches.push([...inputs]);
    return new Promise<number[]>((resolve, reject) => {
      answers.push((error) => (error ? reject(error) : resolve(inputs.map((n) => n * 2))));
    });
  };
  return { run, batches, answer: (i: number, error?: Error) => answers[i]?.(error) };
}

describe('batcher', () => {
  it('sends the inputs of one turn of the event loop as one batch, answering each its own output', async () => {
    const statement = controlledStatement();
    const batcher = createBatcher(statement.run, { maxInFlight: 2, maxBatch: 100 });
    const results = Promise.all([1, 2, 3].map((n) => batcher.submit(n)));
    expect(statement.batches).toEqual([]);
    await nextTurn();
    expect(statement.batches).toEqual([[1, 2, 3]]);
    statement.answer(0);
    await expect(results).resolves.toEqual([2, 4, 6]);
  });

  it('holds what arrives while maxInFlight batches are out, and sends it together when one returns', async () => {
    const statement = controlledStatement();
    const batcher = createBatcher(statement.run, { maxInFlight: 1, maxBatch: 100 });
    const first = batcher.submit(1);
    await nextTurn();
    const later = [batcher.submit(2), batcher.submit(3)];
    await nextTurn();
    const last = batcher.submit(4);
    await nextTurn();
    expect(statement.batches).toEqual([[1]]);
    statement.answer(0);
    await expect(first).resolves.toBe(2);
    await nextTurn();
    expect(statement.batches).toEqual([[1], [2, 3, 4]]);
    statement.answer(1);
    await expect(Promise.all([...later, last])).resolves.toEqual([4, 6, 8]);
  });

  it('keeps up to maxInFlight batches out at once, and no more', async () => {
    const statement = controlledStatement();
    const batcher = createBatcher(statement.run, { maxInFlight: 2, maxBatch: 100 });
    const results = [];
    for (let n = 1; n <= 3; n++) {
      results.push(batcher.submit(n));
      await nextTurn();
    }
    expect(statement.batches).toEqual([[1], [2]]);
    statement.answer(1);
    await nextTurn();
    await nextTurn();
    expect(statement.batches).toEqual([[1], [2], [3]]);
    statement.answer(0);
    statement.answer(2);
    await expect(Promise.all(results)).resolves.toEqual([2, 4, 6]);
  });

  it('splits a queue longer than maxBatch, in order', async () => {
    const statement = controlledStatement();
    const batcher = createBatcher(statement.run, { maxInFlight: 3, maxBatch: 2 });
    const results = Promise.all([1, 2, 3, 4, 5].map((n) => batcher.submit(n)));
    await nextTurn();
    expect(statement.batches).toEqual([[1, 2], [3, 4], [5]]);
    [0, 1, 2].forEach((i) => statement.answer(i));
    await expect(results).resolves.toEqual([2, 4, 6, 8, 10]);
  });

  it('fails every input of a failed batch with its error, and goes on with the next', async () => {
    const statement = controlledStatement();
    const batcher = createBatcher(statement.run, { maxInFlight: 1, maxBatch: 100 });
    const failed = [batcher.submit(1), batcher.submit(2)];
    await nextTurn();
    const next = batcher.submit(3);
    const lost = new Error('connection lost');
    statement.answer(0, lost);
    for (const result of failed) await expect(result).rejects.toBe(lost);
    await nextTurn();
    statement.answer(1);
    await expect(next).resolves.toBe(6);
  });

  it('fails every input of a batch whose run throws before it returns a promise, and goes on', async () => {
    const thrown = new Error('no statement');
    let calls = 0;
    const batcher = createBatcher(
      (inputs: readonly number[]) => {
        if (++calls === 1) throw thrown;
        return Promise.resolve(inputs.map((n) => n * 2));
      },
      { maxInFlight: 1, maxBatch: 100 },
    );
    const failed = [batcher.submit(1), batcher.submit(2)];
    for (const result of failed) await expect(result).rejects.toBe(thrown);
    await expect(batcher.submit(3)).resolves.toBe(6);
    await expect(batcher.drain()).resolves.toBeUndefined();
  });

  it('fails a batch whose statement answers a different number of rows', async () => {
    const batcher = createBatcher(async (inputs: readonly number[]) => inputs.slice(1), {
      maxInFlight: 1,
      maxBatch: 100,
    });
    const results = [batcher.submit(1), batcher.submit(2)];
    for (const result of results) await expect(result).rejects.toThrow('A batch of 2 got 1');
  });

  it("sends an early batcher's batch first in its turn, so that what its callers submit to another joins that one's batch of the turn", async () => {
    const statement = controlledStatement();
    const writes = createBatcher(statement.run, { maxInFlight: 1, maxBatch: 100 });
    const reads = createBatcher(async (inputs: readonly void[]) => inputs.map(() => 0), {
      maxInFlight: 1,
      maxBatch: Infinity,
      early: true,
    });
    // The write's batch is scheduled first; the read, scheduled after it, still runs before it.
    const first = writes.submit(1);
    const second = reads.submit().then(() => writes.submit(2));
    await nextTurn();
    expect(statement.batches).toEqual([[1, 2]]);
    statement.answer(0);
    await expect(Promise.all([first, second])).resolves.toEqual([2, 4]);
  });

  it('keeps the early round first when a late batch was scheduled from the check phase before it', async () => {
    const batches: number[][] = [];
    const writes = createBatcher(
      async (inputs: readonly number[]) => {
        batches.push([...inputs]);
        return inputs;
      },
      { maxInFlight: 1, maxBatch: 100 },
    );
    const reads = createBatcher(async (inputs: readonly void[]) => inputs.map(() => 0), {
      maxInFlight: 1,
      maxBatch: Infinity,
      early: true,
    });
    const written = new Promise<number>((resolve) => {
      // Another callback of this turn's check phase schedules a write's batch, for the next turn,
      // before the early round queued after that callback has run.
      setImmediate(() => void writes.submit(1));
      void reads.submit().then(() => {
        // From the early round of this turn: a read for the next one, whose caller then writes.
        resolve(reads.submit().then(() => writes.submit(2)));
      });
    });
    await expect(written).resolves.toBe(2);
    expect(batches).toEqual([[1, 2]]);
  });

  /**
   * Calls `release` from an I/O callback, in the poll phase, where the group commit's syncs call
   * back; resolves at the end of that turn's check phase, after pushing 'check phase over' to
   * `events` from a setImmediate queued a few microtasks after the release, so after the rounds of
   * the check phase that the batch's return queued.
   */
  function releaseInPollPhase(release: () => void, events: string[]): Promise<void> {
    return new Promise((resolve) =>
      fs.stat(__filename, () => {
        release();
        let hops = 5;
        const later = (): void => {
          if (--hops > 0) {
            void Promise.resolve().then(later);
            return;
          }
          setImmediate(() => {
            events.push('check phase over');
            resolve();
          });
        };
        later();
      }),
    );
  }

  it.each([
    [true, 2],
    [false, 1],
  ])(
    'with answerAfterNextSend %s, has sent %i batches when the caller of the first is answered, in the turn it returned, the second queued while it was out',
    async (answerAfterNextSend, batchesSent) => {
      const events: string[] = [];
      const statement = controlledStatement();
      const batcher = createBatcher(statement.run, {
        maxInFlight: 1,
        maxBatch: 100,
        answerAfterNextSend,
      });
      const first = batcher.submit(1).then((output) => {
        events.push('first answered');
        return { output, batchesSent: statement.batches.length };
      });
      await nextTurn();
      const queued = batcher.submit(2);
      const checkPhaseOver = releaseInPollPhase(() => statement.answer(0), events);
      await expect(first).resolves.toEqual({ output: 2, batchesSent });
      await checkPhaseOver;
      expect(events).toEqual(['first answered', 'check phase over']);
      expect(statement.batches).toEqual([[1], [2]]);
      statement.answer(1);
      await expect(queued).resolves.toBe(4);
    },
  );

  it('with answerAfterNextSend, sends the next batch with what the early round adds to it before answering', async () => {
    const statement = controlledStatement();
    const writes = createBatcher(statement.run, {
      maxInFlight: 1,
      maxBatch: 100,
      answerAfterNextSend: true,
    });
    const reads = createBatcher(async (inputs: readonly void[]) => inputs.map(() => 0), {
      maxInFlight: 1,
      maxBatch: Infinity,
      early: true,
    });
    const first = writes.submit(1).then(() => statement.batches.map((batch) => [...batch]));
    await nextTurn();
    // In the turn the first batch returns: a write queued already, and a read whose caller writes.
    const queued = writes.submit(2);
    const afterRead = reads.submit().then(() => writes.submit(3));
    await releaseInPollPhase(() => statement.answer(0), []);
    await expect(first).resolves.toEqual([[1], [2, 3]]);
    statement.answer(1);
    await expect(Promise.all([queued, afterRead])).resolves.toEqual([4, 6]);
  });

  it('with answerAfterNextSend, answers a failed batch at once, and a batch that fails after one waiting, after it', async () => {
    const events: string[] = [];
    const statement = controlledStatement();
    const batcher = createBatcher(statement.run, {
      maxInFlight: 1,
      maxBatch: 100,
      answerAfterNextSend: true,
    });
    const failed = batcher
      .submit(1)
      .catch(() => events.push(`failed answered, ${statement.batches.length} sent`));
    await nextTurn();
    const succeeded = batcher.submit(2).then(() => events.push('succeeded answered'));
    await releaseInPollPhase(() => statement.answer(0, new Error('EIO')), events);
    // The failure did not wait for the batch sent after it.
    expect(events).toEqual(['failed answered, 1 sent', 'check phase over']);
    expect(statement.batches).toEqual([[1], [2]]);

    // The second returns with a third queued: its answer waits for the third's flush. drain(),
    // called before that, sends the third at once, which fails: its answer follows the second's,
    // and drain() resolves only after both.
    const third = batcher.submit(3).catch(() => events.push('third answered'));
    await nextTurn();
    statement.answer(1);
    await Promise.resolve();
    const drained = batcher.drain().then(() => events.push('drained'));
    statement.answer(2, new Error('EIO'));
    await Promise.all([failed, succeeded, third, drained]);
    expect(events).toEqual([
      'failed answered, 1 sent',
      'check phase over',
      'succeeded answered',
      'third answered',
      'drained',
    ]);
  });

  it('drain() sends what is queued at once and resolves only after every batch has returned', async () => {
    const statement = controlledStatement();
    const batcher = createBatcher(statement.run, { maxInFlight: 1, maxBatch: 100 });
    const first = batcher.submit(1);
    await nextTurn();
    const queued = batcher.submit(2);
    let drained = false;
    const draining = batcher.drain().then(() => (drained = true));
    statement.answer(0);
    await first;
    await Promise.resolve();
    expect(statement.batches).toEqual([[1], [2]]);
    expect(drained).toBe(false);
    statement.answer(1);
    await draining;
    await expect(queued).resolves.toBe(4);
    await expect(batcher.drain()).resolves.toBeUndefined();
  });
});
