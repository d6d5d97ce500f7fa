/**
 * Plant ids for the benchmark, shared by the load generator (which sends them) and the store
 * preparation (which prefills them), so that every POST id is new and every DELETE id exists.
 *
 * Ids are the images of counters 0, 1, 2, ...: counters [0, prefill) are stored before the server
 * starts (and deleted in that order), counters from POST_COUNTER_BASE up are created. `scattered`
 * (the default) maps a counter through a bijection of [0, 2^62) so that writes land all over the
 * primary-key B-tree, as client-chosen ids do; `sequential` appends at its right edge (best case).
 */
export type IdOrder = 'scattered' | 'sequential';

export const ID_ORDERS: readonly IdOrder[] = ['scattered', 'sequential'];

/** Far above any prefill, so created ids never meet prefilled ones. */
export const POST_COUNTER_BASE = 2 ** 40;

const MODULUS = 1n << 62n;
/** Odd, so multiplication modulo 2^62 is a bijection: distinct counters give distinct ids. */
export const SCATTER_MULTIPLIER = 0x1e3779b97f4a7c15n;

/** The ids one load creates, one per call: those of counters POST_COUNTER_BASE, + 1, + 2, ... */
export function createdIds(order: IdOrder): () => string {
  let counter = POST_COUNTER_BASE;
  return () => plantId(counter++, order);
}

/** The id of the counter `n` (0 <= n < 2^53), as decimal text. */
export function plantId(n: number, order: IdOrder): string {
  return order === 'sequential'
    ? String(n + 1)
    : ((BigInt(n) * SCATTER_MULTIPLIER) % MODULUS).toString();
}

/** The same mapping in PostgreSQL, over an integer column or expression `counter`. */
export function plantIdSql(counter: string, order: IdOrder): string {
  return order === 'sequential'
    ? `(${counter})::bigint + 1`
    : `((${counter})::numeric * ${SCATTER_MULTIPLIER} % ${MODULUS})::bigint`;
}

export const PLANT_NAME = 'Monstera deliciosa';
export const PLANT_TAG = 'tropical';

/** The body of a create request, like README's example. */
export function createBody(id: string): string {
  return `{"id":${id},"name":"${PLANT_NAME}","tag":"${PLANT_TAG}"}`;
}
