/**
 * A linearizability check for one plant id seen as a register that is either present or absent.
 * A create answered 200 needs absent and makes it present, a create answered 409 needs present;
 * a delete answered 204 needs present and makes it absent, a delete answered 404 needs absent.
 * Each operation took effect at one instant between its send (start) and its answer (end).
 */
export interface RegisterOp {
  readonly kind: 'create' | 'delete';
  readonly succeeded: boolean;
  readonly start: number;
  readonly end: number;
}

function apply(op: RegisterOp, present: boolean): boolean | undefined {
  if (op.kind === 'create') {
    if (op.succeeded) return present ? undefined : true;
    return present ? present : undefined;
  }
  if (op.succeeded) return present ? false : undefined;
  return present ? undefined : present;
}

/**
 * Whether some order of the operations respects real time (an operation that ended before another
 * started comes first) and the register's rules, starting from `initial`; and if so, the state it
 * ends in. A depth-first search over (operations taken, state), memoised, in the manner of
 * Wing and Gong / Lowe; histories here have a few operations in flight at once, so it stays small.
 */
export function linearize(
  history: readonly RegisterOp[],
  initial: boolean,
): { ok: true; final: boolean } | { ok: false } {
  const ops = [...history].sort((a, b) => a.start - b.start);
  const n = ops.length;
  const taken = new Uint8Array(n);
  const failed = new Set<string>();

  const search = (done: number, firstOpen: number, present: boolean): boolean | undefined => {
    if (done === n) return present;
    const key = `${present ? 1 : 0}:${firstOpen}:${Array.from(taken.subarray(firstOpen)).join('')}`;
    if (failed.has(key)) return undefined;
    // The earliest end among the operations not yet taken bounds which may come next.
    let minEnd = Infinity;
    for (let i = firstOpen; i < n; i++) {
      const op = ops[i] as RegisterOp;
      if (taken[i] === 0 && op.end < minEnd) minEnd = op.end;
      if (op.start > minEnd) break;
    }
    for (let i = firstOpen; i < n; i++) {
      const op = ops[i] as RegisterOp;
      if (op.start > minEnd) break;
      if (taken[i] === 1) continue;
      const next = apply(op, present);
      if (next === undefined) continue;
      taken[i] = 1;
      let open = firstOpen;
      while (open < n && taken[open] === 1) open++;
      const result = search(done + 1, open, next);
      taken[i] = 0;
      if (result !== undefined) return result;
    }
    failed.add(key);
    return undefined;
  };

  const final = search(0, 0, initial);
  return final === undefined ? { ok: false } : { ok: true, final };
}
