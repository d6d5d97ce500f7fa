import type http from 'node:http';
import fc from 'fast-check';
import { cleanupChildren } from '../support/server-process';
import { FUZZ_IDS, fuzzRequest, latin1, rawRequest, type FuzzRequest } from './support/arbitraries';
import {
  answeredByApp,
  documentedFor,
  refusedRequestLevel,
  responseProblems,
  routedPathname,
} from './support/contract';
import {
  bearer,
  createPlant,
  deletePlant,
  keepAliveAgent,
  send,
  type Answer,
} from './support/http';
import {
  acceptedEncoding,
  acceptedMediaType,
  canonicalPathId,
  judgeNewPlant,
} from './support/plant-oracle';
import { Findings } from './support/findings';
import { rawExchange } from './support/raw';
import { readRawRequest } from './support/raw-request';
import { chooseSeed, startService, type Service } from './support/service';
import { dumpPlants, storeReader, type StoredPlant } from './support/store-dump';

/**
 * Property-based fuzzing of the HTTP surface of the real server process. Every answer must keep
 * the contract's rules (never a 5xx; errors are application/json with exactly {error, message};
 * only documented statuses), the predictable ones must be predicted, and the store must end up
 * holding exactly what the 200s and 204s say: a rejected request changes nothing.
 */

const HTTP_RUNS = 15_000;
const RAW_RUNS = 2500;
const BODY_LIMIT = 65_536;
const MAX_HEADER_BYTES = 16 * 1024;
/** An id no fuzzed request names (FUZZ_IDS): its delete is a write that changes nothing. */
const BARRIER_ID = 7n;

const seed = chooseSeed();
const counts = { http: 0, raw: 0, expect: 0, rateLimit: 0 };
const statuses = new Map<number, number>();

let service: Service;
let agent: http.Agent;

beforeAll(async () => {
  console.log(`fuzz: fast-check seed ${seed} (replay with RELIABILITY_SEED=${seed})`);
  // The auth-failure limit would turn the fuzz's bad tokens into 429s after 20; it has a test below.
  service = await startService({ env: { AUTH_FAILURE_LIMIT: '0' } });
  agent = keepAliveAgent(1);
}, 20_000);

afterAll(async () => {
  agent.destroy();
  const total = counts.http + counts.raw + counts.expect + counts.rateLimit;
  console.log(
    `fuzz: ${total} generated requests (${counts.http} over node:http, ${counts.raw} raw over TCP, ` +
      `${counts.expect} with Expect, ${counts.rateLimit} against the auth-failure limit); statuses ` +
      [...statuses.entries()]
        .sort(([a], [b]) => a - b)
        .map(([status, count]) => `${status}×${count}`)
        .join(' '),
  );
  await cleanupChildren();
});

function tally(status: number): void {
  statuses.set(status, (statuses.get(status) ?? 0) + 1);
}

function clip(text: string, max = 300): string {
  return text.length > max ? `${text.slice(0, max)}… (${text.length} chars)` : text;
}

/** The response headers a finding shows; helmet's dozen are the same on every answer. */
const SHOWN_HEADERS = [
  'content-type',
  'content-length',
  'x-request-id',
  'allow',
  'www-authenticate',
  'retry-after',
  'connection',
];

function describeExchange(request: FuzzRequest, answer?: Answer): string {
  const headers = Object.entries(request.headers).map(
    ([name, value]) => `${name}: ${clip(JSON.stringify(value), 120)}`,
  );
  const lines = [
    `request: ${request.method} ${clip(request.path, 200)}${request.chunked ? ' (chunked)' : ''}`,
    ...headers.map((line) => `  ${line}`),
    `  body: ${request.body === undefined ? 'none' : clip(JSON.stringify(request.body.toString('latin1')))}`,
  ];
  if (answer !== undefined) {
    lines.push(
      `answer: ${answer.status} ${JSON.stringify(
        Object.fromEntries(
          Object.entries(answer.headers).filter(([name]) => SHOWN_HEADERS.includes(name)),
        ),
      )}`,
      `  body: ${clip(answer.body.toString('utf8'))}`,
    );
  }
  return lines.join('\n');
}

function headerBytes(request: FuzzRequest): number {
  return (
    request.method.length +
    request.path.length +
    Object.entries(request.headers).reduce((sum, [n, v]) => sum + n.length + v.length + 4, 0) +
    100
  );
}

function header(request: FuzzRequest, name: string): string | undefined {
  const entry = Object.entries(request.headers).find(([key]) => key.toLowerCase() === name);
  return entry?.[1];
}

/** Cache-Control's no-cache directive, in any case, as the server reads it (src/server.ts). */
const NO_CACHE = /(?:^|,)\s*no-cache\s*(?:,|$)/i;

/**
 * Whether a GET or HEAD of a representation without an ETag is answered 304 (README, "Conditional
 * requests"): `If-None-Match: *` matches whatever exists, no other tag can match, and Cache-Control's
 * no-cache skips the check. node:http strips the spaces and tabs around a header's value.
 */
function matchesAnyRepresentation(request: FuzzRequest): boolean {
  const noneMatch = header(request, 'if-none-match')?.replace(/^[ \t]+|[ \t]+$/g, '');
  return noneMatch === '*' && !NO_CACHE.test(header(request, 'cache-control') ?? '');
}

/** The status the contract's order of checks gives, where the request makes it certain. */
function predict(request: FuzzRequest): readonly number[] | undefined {
  const method = request.method.toUpperCase();
  const { path } = request;
  // Only plain origin-form targets: the query and fragment rules are left to the general checks.
  if (/[?#]/.test(path) || routedPathname(path) !== path) return undefined;
  const documented = documentedFor(method, path);
  if (documented.kind === 'unlisted') return matchesAnyRepresentation(request) ? [304] : [200];
  if (documented.kind === 'unknown-path') return [404];
  if (documented.kind === 'unknown-method') return [405];
  if (documented.operationId !== 'createPlant' && documented.operationId !== 'deletePlant') {
    return undefined;
  }
  switch (request.auth) {
    case 'missing':
    case 'invalid':
      return [401];
    case 'malformed':
      return [400];
    case 'garbage':
      return [400, 401];
    case 'valid':
      break;
  }
  const body = request.body;
  if (documented.operationId === 'deletePlant') {
    // The body it ignores is bounded as one that is read; its size is checked before the id.
    if (body !== undefined && body.length > BODY_LIMIT) return [413];
    return canonicalPathId(path.slice('/plants/'.length)) === undefined ? [400] : [204, 404];
  }
  const hasContent = body !== undefined && (request.chunked || body.length > 0);
  const contentType = header(request, 'content-type');
  if (contentType === undefined) return hasContent ? [415] : [400];
  if (!acceptedMediaType(contentType)) return [415];
  if (!acceptedEncoding(header(request, 'content-encoding'))) return [415];
  if (body === undefined || !hasContent) return [400];
  if (body.length > BODY_LIMIT) return [413];
  const verdict = judgeNewPlant(body);
  if (!verdict.valid) return [400];
  return verdict.lenient ? [200, 409, 400] : [200, 409];
}

/** A short name for where a problem happened and what it was, to group findings by. */
function kindOf(method: string, target: string, problem: string): string {
  const documented = documentedFor(method, target);
  const where =
    documented.kind === 'unlisted'
      ? `${documented.endpoint} (outside the contract)`
      : documented.kind === 'operation'
        ? `${method} ${documented.template}`
        : documented.kind === 'unknown-method'
          ? `${method} ${documented.template} (not an operation)`
          : `${method} (unknown path)`;
  return `${where}: ${problem.split(/[:;\n]/, 1)[0]}`;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

function requestIdProblems(request: FuzzRequest, answer: Answer): string[] {
  const echoed = answer.headers['x-request-id'];
  const sent = header(request, 'x-request-id')?.replace(/^[ \t]+|[ \t]+$/g, '');
  // The HTTP server's own answers never read the request's headers: always a new id.
  if (answeredByApp(answer) && sent !== undefined && /^[A-Za-z0-9._:-]{1,128}$/.test(sent)) {
    return echoed === sent ? [] : [`X-Request-Id ${sent} came back as ${String(echoed)}`];
  }
  return typeof echoed === 'string' && UUID.test(echoed)
    ? []
    : [`X-Request-Id ${String(echoed)} is neither the one sent nor a new UUID`];
}

/** What the store must hold, from the 200s and 204s alone, and every answer that contradicts it. */
class StoreModel {
  readonly present: Map<string, StoredPlant>;
  readonly ids: Set<string>;
  readonly violations: string[] = [];
  /** Answers that changed or consulted the store: 200 and 409 to creates, 204 and 404 to deletes. */
  readonly seen = { 200: 0, 409: 0, 204: 0, 404: 0 };

  /** `initial`: what the store holds before the first request. */
  constructor(initial: ReadonlyMap<string, StoredPlant> = new Map()) {
    this.present = new Map(initial);
    this.ids = new Set([...FUZZ_IDS.map(String), ...initial.keys()]);
  }

  /** `describe`: the exchange as a violation shows it. */
  observe(
    request: FuzzRequest,
    answer: Answer,
    describe: () => string = () => describeExchange(request, answer),
  ): void {
    if (!answeredByApp(answer)) return;
    const method = request.method.toUpperCase();
    const documented = documentedFor(method, request.path);
    if (documented.kind !== 'operation') return;
    const { status } = answer;
    const violation = (what: string) => this.violations.push(`${what}\n${describe()}`);

    if (documented.operationId === 'createPlant' && (status === 200 || status === 409)) {
      const created = newPlantOf(request);
      if ('why' in created) {
        violation(`${status} for a body that is not a NewPlant (${created.why})`);
        return;
      }
      const { id, plant } = created;
      this.ids.add(id);
      this.seen[status]++;
      if (status === 409) {
        if (!this.present.has(id)) violation(`409 although plant ${id} is not there`);
        return;
      }
      if (this.present.has(id)) violation(`200 although plant ${id} was already there`);
      this.present.set(id, plant);
      let body: unknown;
      try {
        body = JSON.parse(answer.body.toString('utf8'));
      } catch {
        body = undefined;
      }
      if (JSON.stringify(body) !== JSON.stringify(plant)) {
        violation(`200 answered ${answer.body.toString()} for the plant ${JSON.stringify(plant)}`);
      }
    }

    if (documented.operationId === 'deletePlant' && (status === 204 || status === 404)) {
      const { segment, id } = pathIdOf(request);
      if (id === undefined) {
        violation(`${status} for the path id ${segment}, which is not a canonical int64`);
        return;
      }
      this.ids.add(id);
      this.seen[status]++;
      if (status === 204) {
        if (!this.present.delete(id)) violation(`204 although plant ${id} was not there`);
      } else if (this.present.has(id)) {
        violation(`404 although plant ${id} is there`);
      }
    }
  }

  /**
   * The one change a 200 or a 204 to `request` would make to the store as the model has it: the
   * plant a create stores at its id, or undefined at the id a delete removes; undefined when such
   * an answer could change nothing (not an operation, not a NewPlant, the id taken or absent).
   */
  effectOf(request: FuzzRequest): StoreEffect | undefined {
    const documented = documentedFor(request.method.toUpperCase(), request.path);
    if (documented.kind !== 'operation') return undefined;
    if (documented.operationId === 'createPlant') {
      const created = newPlantOf(request);
      return 'why' in created || this.present.has(created.id) ? undefined : created;
    }
    if (documented.operationId === 'deletePlant') {
      const { id } = pathIdOf(request);
      return id === undefined || !this.present.has(id) ? undefined : { id, plant: undefined };
    }
    return undefined;
  }

  /** Takes `effect` as made: the store holds what it says. */
  apply(effect: StoreEffect): void {
    if (effect.plant === undefined) this.present.delete(effect.id);
    else this.present.set(effect.id, effect.plant);
  }
}

/** A change to one plant of the store: what its id holds after it (undefined: deleted). */
interface StoreEffect {
  readonly id: string;
  readonly plant: StoredPlant | undefined;
}

/** Whether two plants (or absences: undefined) are the same. */
function samePlant(a: StoredPlant | undefined, b: StoredPlant | undefined): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** The plant a create's body stores, and its id; or why the body is not a NewPlant. */
function newPlantOf(request: FuzzRequest): { id: string; plant: StoredPlant } | { why: string } {
  const verdict = request.body === undefined ? undefined : judgeNewPlant(request.body);
  if (verdict?.valid !== true) return { why: verdict?.why ?? 'no body' };
  const plant: StoredPlant =
    verdict.tag === undefined ? { name: verdict.name } : { name: verdict.name, tag: verdict.tag };
  return { id: verdict.id.toString(), plant };
}

/** The id segment of a `DELETE /plants/{id}` path, and the int64 it names if it is canonical. */
function pathIdOf(request: FuzzRequest): { segment: string; id: string | undefined } {
  const segment = routedPathname(request.path).slice('/plants/'.length);
  return { segment, id: canonicalPathId(segment)?.toString() };
}

/** The store operation a status answers for this request line, if it changed or consulted the store. */
function storeOperation(method: string, target: string, status: number): string | undefined {
  const documented = documentedFor(method, target);
  if (documented.kind !== 'operation') return undefined;
  if (documented.operationId === 'createPlant' && (status === 200 || status === 409)) {
    return `${method} ${documented.template}`;
  }
  if (documented.operationId === 'deletePlant' && (status === 204 || status === 404)) {
    return `${method} ${documented.template}`;
  }
  return undefined;
}

/**
 * How the store `now` differs from what it must hold (`expected`, the model), each difference
 * named by what the store held `before` the request.
 */
function storeChanges(
  before: ReadonlyMap<string, StoredPlant>,
  expected: ReadonlyMap<string, StoredPlant>,
  now: ReadonlyMap<string, StoredPlant>,
): string[] {
  const changes: string[] = [];
  for (const id of new Set([...before.keys(), ...expected.keys(), ...now.keys()])) {
    const want = expected.get(id);
    const got = now.get(id);
    if (samePlant(want, got)) continue;
    const had = before.has(id);
    if (got === undefined) {
      changes.push(
        had ? `plant ${id} was deleted without a 204` : `plant ${id} is missing after its 200`,
      );
    } else if (want === undefined) {
      changes.push(
        had
          ? `plant ${id} is still there after a 204`
          : `plant ${id} ${JSON.stringify(got)} was created without a 200`,
      );
    } else {
      changes.push(`plant ${id} is ${JSON.stringify(got)}, not ${JSON.stringify(want)}`);
    }
  }
  return changes;
}

describe('fuzzing the HTTP surface of the real server process', () => {
  it(`keeps the contract for ${HTTP_RUNS} generated requests over node:http, and the store agrees with the answers`, async () => {
    const model = new StoreModel();
    const findings = new Findings();
    let closedOverLimit = 0;
    await fc.assert(
      fc.asyncProperty(fuzzRequest(service.token), async (request) => {
        const method = request.method.toUpperCase();
        let answer: Answer;
        try {
          answer = await send(service.target, request, { agent, timeoutMs: 10_000 });
        } catch (error) {
          const { code, message } = error as NodeJS.ErrnoException;
          // Headers over the limit: the server answers 431 and closes, which may cut our own write
          // (a reset or a broken pipe, never a wait for an answer that does not come).
          if (
            headerBytes(request) > MAX_HEADER_BYTES - 1024 &&
            (code === 'ECONNRESET' || code === 'EPIPE')
          ) {
            closedOverLimit++;
            return;
          }
          findings.record(
            `${method} (any path): no answer (${code ?? 'no code'})`,
            `no answer: ${message}\n${describeExchange(request)}`,
          );
          return;
        }
        counts.http++;
        tally(answer.status);
        const problems = [
          ...responseProblems(method, request.path, answer),
          ...requestIdProblems(request, answer),
        ];
        const fromApp = answeredByApp(answer);
        const documented = documentedFor(method, request.path);
        // The contract's NotModified: only a GET or HEAD that carries If-None-Match, and never one
        // whose Cache-Control holds the no-cache directive, in any case (Express's rule, as `fresh`
        // reads it once the server has put the header in lower case); whether the tag matched is
        // left to the focused tests.
        if (
          answer.status === 304 &&
          (!['GET', 'HEAD'].includes(method) ||
            header(request, 'if-none-match') === undefined ||
            NO_CACHE.test(header(request, 'cache-control') ?? ''))
        ) {
          problems.push('answered 304 to a request without a precondition it evaluates');
        }
        // Without a valid Authorization header (a token in the query never counts), a secured
        // operation answers only 400 or 401, whatever else the request holds.
        if (
          fromApp &&
          request.auth !== 'valid' &&
          documented.kind === 'operation' &&
          ['createPlant', 'deletePlant'].includes(documented.operationId) &&
          ![400, 401].includes(answer.status)
        ) {
          problems.push(`answered ${answer.status} without a valid Authorization header`);
        }
        const expected = fromApp ? predict(request) : undefined;
        if (expected !== undefined && !expected.includes(answer.status)) {
          problems.push(
            `answered ${answer.status} where the contract says ${expected.join(' or ')}`,
          );
        }
        model.observe(request, answer);
        for (const problem of problems) {
          findings.record(
            kindOf(method, request.path, problem),
            `${problem}\n${describeExchange(request, answer)}`,
          );
        }
      }),
      { numRuns: HTTP_RUNS, seed },
    );
    console.log(
      `fuzz (node:http): ${counts.http} requests, ${model.ids.size} ids touched, ` +
        `store answers: creates 200×${model.seen[200]} 409×${model.seen[409]}, deletes 204×${model.seen[204]} ` +
        `404×${model.seen[404]}; ${model.present.size} plants left before the probe, ` +
        `${closedOverLimit} closed over the header limit, ` +
        `${findings.size} kinds of problem found`,
    );

    // The store holds exactly what the answers say: nothing a rejected request sent got in.
    const stored = Object.fromEntries(dumpPlants(service.sqlitePath));
    // And the API agrees: DELETE answers 204 exactly for the plants the answers left in place.
    const ids = [...model.ids];
    const probes = await Promise.all(
      ids.map((id) => deletePlant(service.target, service.token, id)),
    );
    const probed = Object.fromEntries(ids.map((id, i) => [id, (probes[i] as Answer).status]));
    // One assertion, so that a failure shows every kind of problem at once.
    expect({
      findings: findings.report(),
      answersContradictingTheStore: model.violations,
      storedPlants: stored,
      deleteProbes: probed,
    }).toEqual({
      findings: [],
      answersContradictingTheStore: [],
      storedPlants: Object.fromEntries(model.present),
      deleteProbes: Object.fromEntries(ids.map((id) => [id, model.present.has(id) ? 204 : 404])),
    });
    // The generators must reach the store, or the store properties prove little.
    expect(model.seen[200]).toBeGreaterThan(HTTP_RUNS / 100);
    expect(model.seen[204]).toBeGreaterThan(HTTP_RUNS / 200);
    expect(model.seen[409]).toBeGreaterThan(10);
  }, 120_000);

  it(`answers ${RAW_RUNS} raw, often malformed, requests over TCP with well-formed errors or a close, and changes the store only as its 200s and 204s say`, async () => {
    // A plant at every id the raw targets and bodies name, so that a delete has one to delete.
    for (const id of FUZZ_IDS) {
      const created = await createPlant(
        service.target,
        service.token,
        `{"id": ${id}, "name": "raw ${id}"}`,
        { agent },
      );
      expect({ id: String(id), status: created.status }).toEqual({ id: String(id), status: 200 });
    }
    const reader = storeReader(service.sqlitePath);
    let stored = reader.read();
    expect(FUZZ_IDS.map(String).filter((id) => !stored.has(id))).toEqual([]);
    // What the store must hold: what it held, changed only by the 200s and 204s to well-formed
    // requests. Any other change, or a 2xx whose change is missing, is a finding.
    const model = new StoreModel(stored);
    const outcomes = { answered: 0, closed: 0, refusedWithToken: 0, inDoubt: 0 };
    const findings = new Findings();
    let previous = 'none';
    let health: Answer;
    let final: Map<string, StoredPlant>;
    try {
      await fc.assert(
        fc.asyncProperty(rawRequest(service.token), async (raw) => {
          const outcome = await rawExchange(service.target, raw.bytes, {
            noBody: raw.method === 'HEAD',
          });
          counts.raw++;
          const sent = clip(JSON.stringify(raw.bytes.toString('latin1')), 600);
          const shown = () =>
            `seed: ${seed} (RELIABILITY_SEED=${seed} replays the run)\nsent: ${sent}\n` +
            `received: ${clip(JSON.stringify(outcome.data.toString('latin1')), 600)}`;
          const problems: string[] = [];
          if (outcome.hung) problems.push('neither answered nor closed within 3 s');
          if (outcome.malformed !== undefined) problems.push(`not HTTP: ${outcome.malformed}`);
          const answer = outcome.response;
          if (answer !== undefined) {
            outcomes.answered++;
            tally(answer.status);
            const text = raw.bytes.toString('latin1');
            const refusedBeforeRouting = refusedRequestLevel(text.split('\r\n\r\n', 1)[0]!);
            problems.push(
              ...responseProblems(raw.method, raw.target, answer, { refusedBeforeRouting }),
            );
            const rest = answer.rest.toString('latin1');
            if (/(^|\r\n)HTTP\/1\.[01] 5\d\d /.test(rest)) {
              problems.push('a later response on the connection is a 5xx');
            }
            if (raw.method === 'HEAD' && rest !== '' && !rest.startsWith('HTTP/1.')) {
              problems.push('the response to HEAD carries a body');
            }
          } else {
            outcomes.closed++;
          }

          // The store: a well-formed request's answer changes the model as over node:http; one the
          // server must refuse may have no answer that says it reached the store.
          const reading = readRawRequest(raw.bytes);
          const withToken = raw.bytes.includes(service.token);
          if (!reading.wellFormed && withToken) outcomes.refusedWithToken++;
          const request: FuzzRequest | undefined = reading.wellFormed
            ? {
                method: reading.method,
                path: reading.target,
                headers: Object.fromEntries(reading.headers),
                body: reading.body,
                chunked: reading.chunked,
                auth: 'valid', // not read by the model
              }
            : undefined;
          // A client that ends its side before any answer is taken as gone (README, "Operating
          // it"): its request, read whole and carrying the token, may still reach the store,
          // unanswered. Writes commit in the order they came, so once a write sent after it is
          // answered, its own has committed or never will; the one change it could make is
          // then taken as made if the store shows it.
          let inDoubt: StoreEffect | undefined;
          const unanswered = outcome.halfClosed && outcome.data.length === 0;
          if (request !== undefined && unanswered && withToken) {
            inDoubt = model.effectOf(request);
            if (inDoubt !== undefined) {
              outcomes.inDoubt++;
              const after = await deletePlant(service.target, service.token, BARRIER_ID, { agent });
              if (after.status !== 404) {
                problems.push(
                  `the delete of plant ${BARRIER_ID} after it answered ${after.status}`,
                );
              }
            }
          }
          if (answer !== undefined) {
            if (request !== undefined) {
              model.observe(request, answer, shown);
            } else if (!reading.wellFormed && answeredByApp(answer)) {
              const operation = storeOperation(raw.method, raw.target, answer.status);
              if (operation !== undefined) {
                problems.push(
                  `${operation} answered ${answer.status} to a request to refuse: ${reading.why}`,
                );
              }
            }
          }
          const now = reader.read();
          if (inDoubt !== undefined && samePlant(now.get(inDoubt.id), inDoubt.plant)) {
            model.apply(inDoubt);
          }
          const unexplained = storeChanges(stored, model.present, now);
          if (unexplained.length > 0) {
            problems.push(
              `the store changed otherwise than the answers say: ${unexplained.join('; ')}\n` +
                `(the request sent before this one: ${previous})`,
            );
            // From the store as it is, so that the next requests are judged on their own.
            model.present.clear();
            for (const [id, plant] of now) model.present.set(id, plant);
          }
          stored = now;
          previous = sent;

          const from = answer === undefined || !answeredByApp(answer) ? 'server' : 'app';
          for (const problem of problems) {
            findings.record(`${from}: ${problem.split(/[:;\n]/, 1)[0]}`, `${problem}\n${shown()}`);
          }
        }),
        { numRuns: RAW_RUNS, seed },
      );
      health = await send(service.target, { method: 'GET', path: '/healthz' });
      // A change a misread request made after its exchange ended shows here.
      final = reader.read();
    } finally {
      reader.close();
    }
    const late = storeChanges(stored, model.present, final);
    if (late.length > 0) {
      findings.record(
        'after the last request: the store changed otherwise than the answers say',
        `${late.join('; ')}\nseed: ${seed}\nthe last request sent: ${previous}`,
      );
    }
    console.log(
      `fuzz (raw TCP): ${RAW_RUNS} requests, ${outcomes.answered} answered, ` +
        `${outcomes.closed} closed without an answer (${outcomes.inDoubt} in doubt), ` +
        `${outcomes.refusedWithToken} with the token ` +
        `to refuse; store answers: creates 200×${model.seen[200]} 409×${model.seen[409]}, ` +
        `deletes 204×${model.seen[204]} 404×${model.seen[404]}; ${model.present.size} plants left, ` +
        `${findings.size} kinds of problem found`,
    );
    expect({
      findings: findings.report(),
      answersContradictingTheStore: model.violations,
      storedPlants: Object.fromEntries(final),
      healthAfterwards: health.status,
    }).toEqual({
      findings: [],
      answersContradictingTheStore: [],
      storedPlants: Object.fromEntries(model.present),
      healthAfterwards: 200,
    });
    expect(outcomes.answered).toBeGreaterThan(RAW_RUNS / 2);
    // The generator must reach the store, and send the token in framings to refuse, or the store
    // properties prove little (a run has some 30 of each 2xx, and 600 such requests).
    expect(model.seen[200]).toBeGreaterThan(RAW_RUNS / 500);
    expect(model.seen[204]).toBeGreaterThan(RAW_RUNS / 500);
    expect(outcomes.refusedWithToken).toBeGreaterThan(RAW_RUNS / 25);
  }, 120_000);

  it('answers an Expect header it cannot meet with the Error body and a documented status', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(fc.constantFrom('100-continue', '100-Continue', '200-ok', '', 'foo'), latin1(20)),
        fc.constantFrom('/healthz', '/plants'),
        async (expectation, path) => {
          const create = path === '/plants';
          const answer = await send(
            service.target,
            {
              method: create ? 'POST' : 'GET',
              path,
              headers: {
                ...bearer(service.token),
                'Content-Type': 'application/json',
                Expect: expectation,
              },
              // Missing name: a 400 once read, so this test never changes the store.
              ...(create ? { body: '{"id": 7}' } : {}),
            },
            { agent },
          );
          counts.expect++;
          const problems = responseProblems(create ? 'POST' : 'GET', path, answer);
          if (problems.length > 0) {
            throw new Error(
              `Expect: ${JSON.stringify(expectation)} on ${path}: ${problems.join('; ')} ` +
                `(status ${answer.status}, headers ${JSON.stringify(answer.headers)}, body ${JSON.stringify(answer.body.toString())})`,
            );
          }
        },
      ),
      { numRuns: 200, seed },
    );
  }, 60_000);
});

describe('the auth-failure rate limit (default: 20 failures a minute per address)', () => {
  it('answers well-formed 429s with Retry-After once the limit is passed, and leaves public endpoints alone', async () => {
    const limited = await startService();
    const limitedAgent = keepAliveAgent(1);
    try {
      const answers: Answer[] = [];
      for (let i = 0; i < 30; i++) {
        const path = i % 2 === 0 ? '/plants' : `/plants/${i}`;
        const method = i % 2 === 0 ? 'POST' : 'DELETE';
        const answer = await send(
          limited.target,
          {
            method,
            path,
            headers: { Authorization: `Bearer plnt_${'x'.repeat(43)}` },
            ...(method === 'POST' ? { body: '{}' } : {}),
          },
          { agent: limitedAgent },
        );
        counts.rateLimit++;
        expect(responseProblems(method, path, answer)).toEqual([]);
        answers.push(answer);
      }
      expect(answers.slice(0, 20).map((a) => a.status)).toEqual(Array(20).fill(401));
      const over = answers.slice(20);
      expect(over.map((a) => a.status)).toEqual(Array(over.length).fill(429));
      for (const answer of over) {
        const retryAfter = Number(answer.headers['retry-after']);
        expect(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60).toBe(true);
        expect(JSON.parse(answer.body.toString())).toEqual({
          error: 429,
          message: expect.stringMatching(/\S/) as unknown as string,
        });
      }
      const health = await send(limited.target, { method: 'GET', path: '/healthz' });
      expect(health.status).toBe(200);
    } finally {
      limitedAgent.destroy();
    }
  }, 30_000);
});

describe('the oracle the fuzzing relies on', () => {
  const verdict = (text: string) => {
    const judged = judgeNewPlant(Buffer.from(text, 'utf8'));
    return judged.valid ? judged.id : judged.valid;
  };

  it('accepts exactly the NewPlant bodies the contract and README describe', () => {
    expect(verdict('{"id": 1, "name": "a"}')).toBe(1n);
    expect(verdict(' {"name":"a","tag":"t","id":10e-1} ')).toBe(1n);
    expect(verdict('{"\\u0069d": 0.42e2, "name": "a"}')).toBe(42n);
    expect(verdict('{"id": -9.223372036854775808e18, "name": "a"}')).toBe(-(2n ** 63n));
    expect(verdict('{"id": 9223372036854775807, "name": "a"}')).toBe(2n ** 63n - 1n);
    expect(verdict('{"id": 0e999999999999, "name": "a"}')).toBe(0n);
    expect(verdict(`{"id": 1, "name": "${'\u{1f335}'.repeat(255)}"}`)).toBe(1n);
    for (const invalid of [
      '{"id": 9223372036854775808, "name": "a"}',
      '{"id": -9223372036854775809, "name": "a"}',
      '{"id": 1.5, "name": "a"}',
      '{"id": 1e-400, "name": "a"}',
      '{"id": "1", "name": "a"}',
      '{"id": 1, "name": ""}',
      `{"id": 1, "name": "${'a'.repeat(256)}"}`,
      '{"id": 1, "name": "a\\u0000"}',
      '{"id": 1, "name": "\\ud800"}',
      '{"id": 1, "name": "a", "id": 1}',
      '{"id": 1, "name": "a", "tag": null}',
      '{"id": 1, "name": "a", "colour": "green"}',
      '{"id": 1, "name": "a",}',
      '{"id": 1, "name": "a"} x',
      '{"id": 1, "name": "a\tb"}',
      '[{"id": 1, "name": "a"}]',
      '{"id": 1}',
    ]) {
      expect({ invalid, verdict: verdict(invalid) }).toEqual({ invalid, verdict: false });
    }
    const bom = judgeNewPlant(Buffer.from('\ufeff{"id": 1, "name": "a"}', 'utf8'));
    expect(bom.valid && bom.lenient).toBe(true);
    expect(judgeNewPlant(Buffer.from([0x7b, 0xff, 0x7d])).valid).toBe(false);
  });

  it('reads path ids and media types as the contract says', () => {
    expect(canonicalPathId('1')).toBe(1n);
    expect(canonicalPathId('%31')).toBe(1n);
    expect(canonicalPathId('-9223372036854775808')).toBe(-(2n ** 63n));
    for (const segment of ['01', '-0', '+1', '1.0', '%zz', '9223372036854775808', '', ' 1']) {
      expect({ segment, id: canonicalPathId(segment) }).toEqual({ segment, id: undefined });
    }
    expect(acceptedMediaType('Application/JSON; charset="UTF-8"')).toBe(true);
    expect(acceptedMediaType('application/json; foo=bar')).toBe(true);
    expect(acceptedMediaType('application/json; charset=latin1')).toBe(false);
    expect(acceptedMediaType('text/json')).toBe(false);
    expect(acceptedEncoding(' Identity ')).toBe(true);
    expect(acceptedEncoding('gzip')).toBe(false);
  });
});
