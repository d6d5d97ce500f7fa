interface Pending<I, O> {
  readonly input: I;
  readonly resolve: (output: O) => void;
  readonly reject: (error: unknown) => void;
}

/** What `start` returns, or its exception as a rejected promise: a batch fails the same either way. */
function started<T>(start: () => Promise<T>): Promise<T> {
  try {
    return start();
  } catch (error) {
    return Promise.reject(error);
  }
}

/** One unit of work for many callers; see createBatcher. */
export interface Batcher<I, O> {
  /** Queues `input` for the next batch; settles with its own answer once that batch's run has. */
  submit(input: I): Promise<O>;
  /** Sends whatever is queued at once and resolves when no batch is queued or in flight. */
  drain(): Promise<void>;
}

export interface BatcherOptions {
  /** Batches sent and not yet answered, at most; what arrives meanwhile waits and forms the next batch. */
  readonly maxInFlight: number;
  /** Inputs in one batch, at most. */
  readonly maxBatch: number;
  /**
   * Sends its batches in the early round of the check phase (default false), before the other
   * batchers' that are due in the same turn of the event loop: for reads whose callers go on to
   * submit to other batchers, so that what they submit joins the batches those send next rather
   * than waiting for the ones after (see inCheckPhase).
   */
  readonly early?: boolean;
  /**
   * Answers a batch whose run succeeded only after the batch queued meanwhile has been sent
   * (default false), in the late round that sends it: for a late batcher whose run ends off the
   * event loop (the group commit's sync, whose callback comes in the poll phase), so that the next
   * run's wait overlaps the work its callers do with their answers instead of starting after it.
   * The answers then come in the same turn's check phase; a run that ended in the check phase would
   * have them wait for the next turn's. A caller that submits again as soon as it is answered joins
   * the batch after that one. Failures are answered at once (after any answers still waiting).
   */
  readonly answerAfterNextSend?: boolean;
}

/** The tasks of one round of inCheckPhase, run by a setImmediate of its own. */
interface Round {
  readonly tasks: (() => void)[];
}

/** The early round queued last and not run yet, which early tasks join. */
let earlyRound: Round | undefined;
/** The late round queued and not run yet, which late tasks join. */
let lateRound: Round | undefined;

function queueRound(): Round {
  const round: Round = { tasks: [] };
  setImmediate(runRound, round);
  return round;
}

/**
 * Runs the round's tasks; what is queued meanwhile goes to another round. The tasks, batchers'
 * flushes and answers, do not throw: a batch's run is called through started(), and its failure
 * rejects.
 */
function runRound(round: Round): void {
  if (earlyRound === round) earlyRound = undefined;
  if (lateRound === round) lateRound = undefined;
  for (const task of round.tasks) task();
}

/**
 * Runs `task` in the check phase of the event loop, as setImmediate does, in one of two rounds:
 * the early tasks run in a setImmediate of their own before the late round's, so the promises they
 * settle, and the callbacks that go on from them, run before any late task. A late round is queued
 * together with a new early round right before it, which the early tasks queued from then on join:
 * so an early task queued after a late one runs first, even when the late round was queued from
 * the check phase, for the next turn, while an early round was still to run in this one.
 */
function inCheckPhase(early: boolean, task: () => void): void {
  if (early) {
    earlyRound ??= queueRound();
    earlyRound.tasks.push(task);
    return;
  }
  if (lateRound === undefined) {
    earlyRound = queueRound();
    lateRound = queueRound();
  }
  lateRound.tasks.push(task);
}

/**
 * Group commit: the inputs submitted while `maxInFlight` batches are out (or within one turn of
 * the event loop) go to the store together, as one unit of work (a statement, a transaction), and
 * each caller gets its own output. A batch is sent only after every one of its inputs was
 * submitted, so each caller's work began after its call, as if it ran alone: a look-up sees every
 * commit answered before the call. If the run fails, every input of the batch fails with its
 * error. Used by the PostgreSQL store's statements and by the SQLite group commit.
 *
 * `run` gets the inputs in submission order and must answer one output per input, in that order.
 */
export function createBatcher<I, O>(
  run: (inputs: readonly I[]) => Promise<readonly O[]>,
  { maxInFlight, maxBatch, early = false, answerAfterNextSend = false }: BatcherOptions,
): Batcher<I, O> {
  let queue: Pending<I, O>[] = [];
  let scheduled = false;
  let inFlight = 0;
  /** Returned batches whose answers wait in a round (answerAfterNextSend). */
  let deferred = 0;
  let drained: (() => void)[] = [];

  // After another flush (drain(), or a batch's return while drain() waits), the task finds nothing
  // scheduled, or what was scheduled since.
  const flushScheduled = () => {
    if (scheduled) flush();
  };
  const schedule = () => {
    // In the check phase, not a microtask: requests whose bytes arrived in the same poll join the batch.
    if (scheduled || inFlight >= maxInFlight || queue.length === 0) return;
    scheduled = true;
    inCheckPhase(early, flushScheduled);
  };

  const settleDrains = () => {
    if (inFlight > 0 || queue.length > 0 || deferred > 0) return;
    const waiting = drained;
    drained = [];
    for (const resolve of waiting) resolve();
  };

  /** Gives a returned batch's answers, then settles drain() when nothing is left. */
  const deliver = (answer: () => void) => {
    answer();
    settleDrains();
  };

  function send(batch: Pending<I, O>[]): void {
    inFlight++;
    const finished = (succeeded: boolean, answer: () => void) => {
      inFlight--;
      // While drain() waits (the store is closing), what queued up is sent at once.
      if (drained.length > 0) flush();
      else schedule();
      // A success waits for the flush just scheduled, queued after it in the same late round
      // (see answerAfterNextSend); a failure is answered at once, unless answers are still
      // waiting, which it then follows, so that answers keep their order and drain() waits for
      // every one.
      if (answerAfterNextSend && ((succeeded && scheduled) || deferred > 0)) {
        deferred++;
        inCheckPhase(false, () => {
          deferred--;
          deliver(answer);
        });
      } else {
        deliver(answer);
      }
    };
    const failed = (error: unknown) =>
      finished(false, () => {
        for (const pending of batch) pending.reject(error);
      });
    started(() => run(batch.map((pending) => pending.input))).then((outputs) => {
      if (outputs.length !== batch.length) {
        failed(new Error(`A batch of ${batch.length} got ${outputs.length} answers.`));
      } else {
        finished(true, () => batch.forEach((pending, i) => pending.resolve(outputs[i] as O)));
      }
    }, failed);
  }

  function flush(): void {
    scheduled = false;
    while (inFlight < maxInFlight && queue.length > 0) {
      const batch = queue.length <= maxBatch ? queue : queue.slice(0, maxBatch);
      queue = batch === queue ? [] : queue.slice(maxBatch);
      send(batch);
    }
  }

  return {
    submit(input) {
      return new Promise<O>((resolve, reject) => {
        queue.push({ input, resolve, reject });
        schedule();
      });
    },
    drain() {
      flush();
      if (inFlight === 0 && queue.length === 0) return Promise.resolve();
      return new Promise<void>((resolve) => drained.push(resolve));
    },
  };
}
