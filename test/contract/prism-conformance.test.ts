import { cleanupChildren, startWithToken } from '../support/server-process';
import { startPrism, type RunningPrism } from './support/prism';

/** One request; `token` says which Authorization header it carries. */
interface Exchange {
  readonly method?: string;
  readonly path: string;
  readonly token?: 'valid' | 'unknown' | 'malformed' | 'none';
  readonly type?: string;
  readonly body?: string;
  readonly status: number;
}

interface Answer {
  readonly status: number;
  /** Whether Prism answered itself (application/problem+json with a Prism error type). */
  readonly byPrism: boolean;
  /** Prism's findings about the request and the response, from the `sl-violations` header. */
  readonly violations: unknown[];
  readonly body: string;
}

const PRISM_ERROR = 'https://stoplight.io/prism/errors#';
const UNKNOWN_TOKEN = `plnt_${'A'.repeat(43)}`;
const json = (value: unknown) => JSON.stringify(value);

let token: string;
let validating: RunningPrism;
let forwarding: RunningPrism;

beforeAll(async () => {
  const started = await startWithToken();
  token = started.token;
  const { baseUrl } = started.server;
  [validating, forwarding] = await Promise.all([
    startPrism(baseUrl, { validateRequests: true }),
    startPrism(baseUrl, { validateRequests: false }),
  ]);
}, 60_000);

afterAll(async () => {
  await Promise.all([validating?.stop(), forwarding?.stop()]);
  await cleanupChildren();
});

async function send(prism: RunningPrism, exchange: Exchange): Promise<Answer> {
  const headers: Record<string, string> = {};
  const authorization = {
    valid: `Bearer ${token}`,
    unknown: `Bearer ${UNKNOWN_TOKEN}`,
    malformed: 'Bearer',
    none: undefined,
  }[exchange.token ?? 'none'];
  if (authorization !== undefined) headers['Authorization'] = authorization;
  if (exchange.type !== undefined) headers['Content-Type'] = exchange.type;
  const response = await fetch(`${prism.baseUrl}${exchange.path}`, {
    method: exchange.method ?? 'GET',
    headers,
    ...(exchange.body === undefined ? {} : { body: exchange.body }),
    signal: AbortSignal.timeout(10_000),
  });
  const body = await response.text();
  const type = response.headers.get('content-type') ?? '';
  const byPrism = type.startsWith('application/problem+json') && body.includes(PRISM_ERROR);
  const violations = JSON.parse(response.headers.get('sl-violations') ?? '[]') as unknown[];
  return { status: response.status, byPrism, violations, body };
}

/** A create request with the valid token; spread and override to make it invalid. */
const create = (plant: Record<string, unknown>) => ({
  method: 'POST',
  path: '/plants',
  token: 'valid' as const,
  type: 'application/json',
  body: json(plant),
});
const remove = (id: string) => ({
  method: 'DELETE',
  path: `/plants/${id}`,
  token: 'valid' as const,
});
const verdict = ({ status, byPrism, violations }: Answer) => ({ status, byPrism, violations });

describe('Prism as a validating proxy in front of the running server', () => {
  describe('valid requests: forwarded, and every answer conforms to the contract', () => {
    it.each<[string, Exchange]>([
      ['create', { ...create({ id: 501, name: 'Monstera deliciosa' }), status: 200 }],
      [
        'create with a tag',
        { ...create({ id: 502, name: 'Ficus', tag: 'tropical' }), status: 200 },
      ],
      ['create a taken id', { ...create({ id: 501, name: 'Again' }), status: 409 }],
      ['delete', { ...remove('501'), status: 204 }],
      ['delete an absent plant', { ...remove('501'), status: 404 }],
      [
        'an unknown token',
        { ...create({ id: 503, name: 'Pilea' }), token: 'unknown', status: 401 },
      ],
      ['liveness', { path: '/healthz', status: 200 }],
      ['readiness', { path: '/readyz', status: 200 }],
      ['the contract as YAML', { path: '/openapi.yaml', status: 200 }],
      ['the contract as JSON', { path: '/openapi.json', status: 200 }],
      ['the reference page', { path: '/docs', status: 200 }],
      ['its style sheet', { path: '/docs/assets/swagger-ui.css', status: 200 }],
      ['its script', { path: '/docs/assets/swagger-ui-bundle.js', status: 200 }],
      ['its initializer', { path: '/docs/assets/docs.js', status: 200 }],
    ])('%s', async (_, exchange) => {
      const answer = await send(validating, exchange);

      expect(verdict(answer)).toStrictEqual({
        status: exchange.status,
        byPrism: false,
        violations: [],
      });
    });
  });

  describe('invalid requests: Prism refuses them itself', () => {
    const plant = create({ id: 511, name: 'Calathea' });
    it.each<[string, Exchange]>([
      ['no token', { ...plant, token: 'none', status: 401 }],
      ['a bearer header without a token', { ...plant, token: 'malformed', status: 401 }],
      ['an empty name', { ...create({ id: 512, name: '' }), status: 422 }],
      ['a text/plain body', { ...plant, type: 'text/plain', body: 'hello', status: 422 }],
      ['no body', { method: 'POST', path: '/plants', token: 'valid', status: 422 }],
      ['an id that is not an integer', { ...remove('abc'), status: 422 }],
      ['an asset the page does not have', { path: '/docs/assets/other.js', status: 422 }],
    ])('%s', async (_, exchange) => {
      const answer = await send(validating, exchange);

      expect({ status: answer.status, byPrism: answer.byPrism }).toStrictEqual({
        status: exchange.status,
        byPrism: true,
      });
    });
  });

  // Prism checks security even with --validate-request=false: a request without a token (or with
  // `Bearer` alone) always gets Prism's own 401. The server's 401 is judged above (unknown token).
  describe("invalid requests forwarded anyway: the server's error answers conform", () => {
    const plant = create({ id: 521, name: 'Calathea' });
    it.each<[string, Exchange]>([
      ['an empty name', { ...create({ id: 521, name: '' }), status: 400 }],
      ['an unknown property', { ...create({ id: 521, name: 'x', colour: 'green' }), status: 400 }],
      ['a text/plain body', { ...plant, type: 'text/plain', body: 'hello', status: 415 }],
      ['a body over the limit', { ...create({ id: 521, name: 'x'.repeat(70_000) }), status: 413 }],
      ['an id with a leading zero', { ...remove('01'), status: 400 }],
      ['an unknown query parameter', { path: '/healthz?verbose=1', status: 400 }],
      ['an asset the page does not have', { path: '/docs/assets/other.js', status: 400 }],
    ])('%s', async (_, exchange) => {
      const answer = await send(forwarding, exchange);

      expect(verdict(answer)).toStrictEqual({
        status: exchange.status,
        byPrism: false,
        violations: [],
      });
      expect(JSON.parse(answer.body)).toMatchObject({ error: exchange.status });
    });
  });
});
