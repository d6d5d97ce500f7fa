import fs from 'node:fs';
import type { IncomingMessage } from 'node:http';
import path from 'node:path';
import parseurl from 'parseurl';
import YAML from 'yaml';
import { PROJECT_ROOT } from '../../support/server-process';
import type { Answer } from './http';

/** What openapi.yaml documents for one request, read from the contract itself. */
export type Documented =
  | {
      readonly kind: 'operation';
      readonly template: string;
      readonly operationId: string;
      /** Status → the headers the contract marks required on that response. */
      readonly responses: ReadonlyMap<number, readonly string[]>;
    }
  | { readonly kind: 'unknown-path' }
  /** Served but outside the contract (UNLISTED_ENDPOINTS): `endpoint` is its method and path. */
  | { readonly kind: 'unlisted'; readonly endpoint: string }
  | {
      readonly kind: 'unknown-method';
      readonly template: string;
      readonly allow: readonly string[];
    };

/**
 * Refused by the HTTP server before any route is known (src/http/client-errors.ts), so documented
 * everywhere.
 */
export const SERVER_LEVEL_STATUSES: ReadonlySet<number> = new Set([400, 408, 431]);
/** Documented for every operation that lists them, and in the contract's description for all. */
export const ALWAYS_DOCUMENTED: ReadonlySet<number> = new Set([408, 431]);

type Spec = {
  paths: Record<
    string,
    Record<string, { operationId: string; responses: Record<string, unknown> }>
  >;
  components: {
    responses: Record<string, { headers?: Record<string, unknown> }>;
    headers: Record<string, { required?: boolean }>;
  };
};

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

const spec = YAML.parse(fs.readFileSync(path.join(PROJECT_ROOT, 'openapi.yaml'), 'utf8')) as Spec;

function resolveResponse(response: unknown): { headers?: Record<string, unknown> } {
  const ref = (response as { $ref?: unknown }).$ref;
  if (typeof ref === 'string') {
    const name = ref.replace('#/components/responses/', '');
    const resolved = spec.components.responses[name];
    if (resolved === undefined) throw new Error(`openapi.yaml: unresolved ${ref}`);
    return resolved;
  }
  return response as { headers?: Record<string, unknown> };
}

function requiredHeaders(response: unknown): string[] {
  const headers = resolveResponse(response).headers ?? {};
  return Object.entries(headers)
    .filter(([, header]) => {
      const ref = (header as { $ref?: unknown }).$ref;
      const resolved =
        typeof ref === 'string'
          ? spec.components.headers[ref.replace('#/components/headers/', '')]
          : (header as { required?: boolean });
      return resolved?.required === true;
    })
    .map(([name]) => name.toLowerCase());
}

const routes = Object.entries(spec.paths).map(([template, item]) => {
  const pattern = new RegExp(
    `^${template
      .split(/\{[^}/]+\}/)
      .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
      .join('[^/]+')}$`,
  );
  const operations = new Map<string, Documented & { kind: 'operation' }>();
  for (const method of METHODS) {
    const operation = item[method];
    if (operation === undefined) continue;
    const responses = new Map<number, string[]>();
    for (const [status, response] of Object.entries(operation.responses)) {
      responses.set(Number(status), requiredHeaders(response));
    }
    operations.set(method.toUpperCase(), {
      kind: 'operation',
      template,
      operationId: operation.operationId,
      responses,
    });
  }
  return { template, pattern, operations };
});

/** The path Express routes on: its router's own `parseurl`, given the raw request target. */
export function routedPathname(target: string): string {
  try {
    return parseurl({ url: target } as IncomingMessage)?.pathname ?? '';
  } catch {
    // Node's legacy URL parser, which parseurl uses for targets other than plain origin-form,
    // throws on some targets (e.g. "-:"); no route has such a path.
    return '';
  }
}

/** A host and perhaps a port (RFC 3986 section 3.2.2), or nothing. */
const HOST_VALUE = /^(\[[0-9A-Za-z:.!$&'()*+,;=~_-]+\]|[0-9A-Za-z.!$&'()*+,;=~_%-]*)(:[0-9]*)?$/;

/**
 * Whether the app refuses a raw request with 400 before routing it, for its request line or its
 * Host (route-gate.ts, checkRequestTarget): an HTTP version other than 1.x that node:http still
 * takes (`HTTP/2.0`, `HTTP/0.9`, or none, which is HTTP/0.9), no Host in an HTTP/1.1 request, more
 * than one Host line, or a value that is not a host (and perhaps a port) (RFC 9112 section 3.2).
 */
export function refusedRequestLevel(head: string): boolean {
  const [requestLine = '', ...lines] = head.split('\r\n');
  if (!/ HTTP\/1\.\d$/.test(requestLine)) return true;
  const hosts = lines.filter((line) => /^host[ \t]*:/i.test(line));
  if (hosts.length === 0) return / HTTP\/1\.1$/.test(requestLine);
  return hosts.length > 1 || !HOST_VALUE.test(hosts[0]!.replace(/^[^:]*:/, '').trim());
}

/** A target the server reads neither as a path nor as a URL (server.ts, toOriginForm). */
function unparseableTarget(target: string): boolean {
  return !target.startsWith('/') && target !== '*' && !URL.canParse(target);
}

/** What the contract documents for this method and request target. */
export function documentedFor(method: string, target: string): Documented {
  const pathname = routedPathname(target);
  // The Prometheus endpoint, outside the contract (UNLISTED_ENDPOINTS), refuses other methods too.
  if (pathname === '/metrics' && method !== 'GET' && method !== 'HEAD') {
    return { kind: 'unknown-method', template: '/metrics', allow: ['GET', 'HEAD'] };
  }
  const endpoint = `${method} ${pathname}`;
  if (UNLISTED_ENDPOINTS.has(endpoint)) return { kind: 'unlisted', endpoint };
  const route = routes.find((candidate) => candidate.pattern.test(pathname));
  if (route === undefined) return { kind: 'unknown-path' };
  const effective = method === 'HEAD' && !route.operations.has('HEAD') ? 'GET' : method;
  const operation = route.operations.get(effective);
  if (operation !== undefined) return operation;
  const allow = [...route.operations.keys()];
  if (allow.includes('GET')) allow.push('HEAD');
  return { kind: 'unknown-method', template: route.template, allow };
}

/**
 * Served but not in openapi.yaml: the Prometheus endpoint the issue asks for (Express answers HEAD
 * with its GET route). Only its 200 is let through, and the 304 that every GET answers to
 * `If-None-Match: *` (see the contract's NotModified); anything else on it follows the contract.
 */
const UNLISTED_ENDPOINTS: ReadonlySet<string> = new Set(['GET /metrics', 'HEAD /metrics']);

/** The operation ids of the contract, for reports. */
export function operationIds(): string[] {
  return routes.flatMap((route) => [...route.operations.values()].map((op) => op.operationId));
}

/**
 * Whether the app wrote the answer, not the HTTP server before the app saw the request
 * (src/http/client-errors.ts): the app sets helmet's headers, X-Frame-Options among them, on
 * every answer.
 */
export function answeredByApp(answer: Answer): boolean {
  return answer.headers['x-frame-options'] !== undefined;
}

/**
 * Problems with a response by the rules every answer must keep: never a 5xx (unless expected), never
 * a 1xx or a 3xx but a documented 304; always an X-Request-Id; an error is
 * `application/json` with exactly `{error: <status>, message: <non-empty string>}`; its status is
 * documented (for the operation, 404 for an unknown path, 405 with Allow for an unknown method,
 * 400/408/431 from the HTTP server itself); and the headers the contract requires are there.
 * An empty list means the response is fine.
 */
export function responseProblems(
  method: string,
  target: string,
  answer: Answer,
  {
    expected5xx = [],
    refusedBeforeRouting = false,
  }: { expected5xx?: readonly number[]; refusedBeforeRouting?: boolean } = {},
): string[] {
  const problems: string[] = [];
  const { status, headers } = answer;
  if (status >= 500 && !expected5xx.includes(status)) problems.push(`answered ${status}`);
  // 304 only where the contract documents it (conditional GETs), checked below like any status.
  if (status < 200 || (status >= 300 && status < 400 && status !== 304)) {
    problems.push(`answered ${status}`);
  }
  if (headers['x-request-id'] === undefined) {
    problems.push(`answered ${status} without X-Request-Id`);
  }
  const fromApp = answeredByApp(answer);
  const documented = documentedFor(method, target);

  if (status >= 400) {
    const type = headers['content-type'] ?? '';
    if (!/^application\/json(;|$)/.test(type)) {
      problems.push(`error ${status} has Content-Type ${JSON.stringify(type)}`);
    }
    if (method !== 'HEAD') {
      let body: unknown;
      try {
        body = JSON.parse(answer.body.toString('utf8'));
      } catch {
        body = undefined;
      }
      const shaped =
        typeof body === 'object' &&
        body !== null &&
        !Array.isArray(body) &&
        Object.keys(body).sort().join(',') === 'error,message' &&
        (body as { error: unknown }).error === status &&
        typeof (body as { message: unknown }).message === 'string' &&
        (body as { message: string }).message.length > 0;
      if (!shaped) {
        problems.push(`error ${status} body is not the Error shape: ${answer.body.toString()}`);
      }
    }
  }

  if (!fromApp) {
    // The HTTP server answered before the app saw the request (src/http/client-errors.ts), or a
    // CONNECT, which it answers 405 itself: no method opens a tunnel here.
    if (!SERVER_LEVEL_STATUSES.has(status) && !(method === 'CONNECT' && status === 405)) {
      problems.push(`answered ${status} without the app's headers, so not from the app`);
    }
    return problems;
  }
  // Malformed at the request level, before any route: an HTTP version other than 1.x, an HTTP/1.1
  // request without Host, two Host lines or one that holds no host (RFC 9112 section 3.2), a target
  // with a fragment (no request target may carry one), or one that is neither a path nor a URL. The
  // app answers 400 first.
  if (refusedBeforeRouting || target.includes('#') || unparseableTarget(target)) {
    if (status !== 400)
      problems.push(`a malformed request line, target or Host answered ${status}, not 400`);
    return problems;
  }
  if (ALWAYS_DOCUMENTED.has(status)) return problems;
  switch (documented.kind) {
    case 'unlisted':
      if (status !== 200 && status !== 304) {
        problems.push(`${documented.endpoint} answered ${status}, not 200 or 304`);
      }
      break;
    case 'unknown-path':
      if (status !== 404) problems.push(`unknown path answered ${status}, not 404`);
      break;
    case 'unknown-method':
      if (status !== 405) problems.push(`${method} on ${documented.template} answered ${status}`);
      else if (headers['allow'] !== documented.allow.join(', ')) {
        problems.push(`405 with Allow ${headers['allow']}, not ${documented.allow.join(', ')}`);
      }
      break;
    case 'operation': {
      const required = documented.responses.get(status);
      if (required === undefined) {
        problems.push(`${documented.operationId} answered ${status}, which it does not document`);
        break;
      }
      for (const header of required) {
        if (headers[header] === undefined) {
          problems.push(`${documented.operationId} ${status} lacks the ${header} header`);
        }
      }
      break;
    }
  }
  return problems;
}
