import type { IncomingMessage } from 'node:http';
import type { Request, RequestHandler, Response } from 'express';
import { HttpProblem, UNKNOWN_QUERY_PARAMETER } from './http-error';
import type { OperationInfo, RouteInfo } from './openapi-document';
import type { Cors } from './protections';

/** The contract operation a request was routed to, set by the route gate. */
export function routedOperation(res: Response): OperationInfo | undefined {
  return res.locals['operation'] as OperationInfo | undefined;
}

/**
 * A path parameter of the routed request, percent-decoded, exactly as the client sent it: the
 * validator may coerce `req.params` to numbers, which would round an int64.
 */
export function pathParameter(res: Response, name: string): string | undefined {
  const raw = (res.locals['pathParameters'] as Record<string, string> | undefined)?.[name];
  // The validator has already refused a malformed percent-encoding with 400.
  return raw === undefined ? undefined : decodeURIComponent(raw);
}

/** HEAD requests routed as the GET they mirror, whose method the gate rewrote; see methodAsSent. */
const headsRoutedAsGet = new WeakSet<IncomingMessage>();

/** The method a request arrived with, HEAD for one the gate routes as GET (for its log line). */
export function methodAsSent(req: IncomingMessage): string {
  return headsRoutedAsGet.has(req) ? 'HEAD' : (req.method ?? '');
}

/** Requests whose target is neither a path nor an http(s) URL; see markUnparseableTarget. */
const unparseableTargets = new WeakSet<IncomingMessage>();

/**
 * Marks a request whose target is neither a path nor an http(s) URL, which the HTTP server (server.ts)
 * passes on as `/#<target>`: Express can route that (it could not route `http://`, which has no
 * path), no route ever sees it (checkRequestTarget refuses every fragment), and the log shows the
 * target. checkRequestTarget then answers 400 saying why, at no cost to requests with a plain
 * target.
 */
export function markUnparseableTarget(req: IncomingMessage): void {
  unparseableTargets.add(req);
}

/**
 * A Host header's value (RFC 9110 section 7.2): a host, IP literal or name (RFC 3986 section
 * 3.2.2), then perhaps a port; empty is allowed. No space, so the server's join of two Host lines
 * (`a, b`: it joins duplicates, see server.ts) never matches.
 */
const HOST = /^(?:\[[0-9A-Za-z:.!$&'()*+,;=~_-]+\]|[0-9A-Za-z.!$&'()*+,;=~_%-]*)(?::[0-9]*)?$/;

/**
 * Throws a 400 for a request no route can answer (RFC 9112 section 3.2): an HTTP version other
 * than 1.x, HTTP/1.1 without Host, more than one Host or one that is not a host, a #fragment in
 * the target, or a target that is neither a path nor a URL.
 */
export function checkRequestTarget(req: Request): void {
  // node:http also takes `HTTP/2.0` and the version-less request line of HTTP/0.9.
  if (req.httpVersionMajor !== 1) {
    throw new HttpProblem(400, 'The request must be HTTP/1.1 or HTTP/1.0.');
  }
  const host = req.headers.host;
  if (host === undefined) {
    if (req.httpVersion === '1.1')
      throw new HttpProblem(400, 'An HTTP/1.1 request needs a Host header.');
  } else if (!HOST.test(host)) {
    throw new HttpProblem(
      400,
      'A request needs one Host header holding a host and perhaps a port.',
    );
  }
  if (req.url.includes('#')) {
    throw new HttpProblem(
      400,
      unparseableTargets.has(req)
        ? 'The request target must be a path, or an http or https URL.'
        : 'A request target must not contain a fragment (#).',
    );
  }
}

/** The first parameter's name in the query of `url`, or undefined for none (no query, `?`, `?&`). */
function firstQueryName(url: string): string | undefined {
  const start = url.indexOf('?');
  if (start === -1) return undefined;
  const first = url
    .slice(start + 1)
    .split('&')
    .find((parameter) => parameter !== '');
  if (first === undefined) return undefined;
  let name = first.split('=', 1)[0]!.replace(/\+/g, ' ');
  try {
    name = decodeURIComponent(name);
  } catch {
    // A malformed percent-encoding is shown as sent.
  }
  // `a[0]` is the parameter `a` in the bracket notation the validator reads.
  const bracket = name.indexOf('[');
  return bracket > 0 ? name.slice(0, bracket) : name;
}

/**
 * Answers the validator's 400 for an unknown query parameter to a routed operation that declares
 * none, after the body is read (415, 413 and 408 come first), before the validator: the validator would merge the query's bracketed
 * names (`a[0]=1&a[1]=1...`) one copy of the whole object at a time, which took 150 ms a request of
 * 1,000 names. This reads the first name only. An empty query (`?`, `?&`) passes, as before.
 */
export const refuseUndeclaredQuery: RequestHandler = (req, res, next) => {
  if (routedOperation(res)?.takesQuery !== false) return next();
  const name = firstQueryName(req.url);
  if (name === undefined) return next();
  throw new HttpProblem(
    400,
    name === ''
      ? 'request/query is not allowed: the operation takes no query parameters'
      : `request/query/${name} ${UNKNOWN_QUERY_PARAMETER}`,
  );
};

/** The 405 to `method` on the resource at `template`, with the methods it allows. */
export function methodNotAllowed(method: string, template: string, allow: string): HttpProblem {
  return new HttpProblem(405, `${method} is not allowed on ${template}; allowed: ${allow}.`, {
    Allow: allow,
  });
}

function allowedMethods(route: RouteInfo): string {
  const methods = [...route.operations.keys()];
  if (methods.includes('GET') && !methods.includes('HEAD')) methods.push('HEAD');
  return methods.join(', ');
}

/**
 * Answers 400 for a malformed target (an HTTP/1.1 request without Host, a #fragment, neither a path
 * nor a URL), 404 for a path the contract does not have and 405 (with `Allow`) for a method it does
 * not have on that path, before authentication, so routing never depends on credentials. Given
 * `cors`, a CORS preflight to a path the contract has is answered here (see corsFor).
 */
export function createRouteGate(routes: readonly RouteInfo[], cors?: Cors): RequestHandler {
  return (req, res, next) => {
    checkRequestTarget(req);
    const path = req.path;
    let route: RouteInfo | undefined;
    let match: RegExpExecArray | null = null;
    for (const candidate of routes) {
      match = candidate.pattern.exec(path);
      if (match !== null) {
        route = candidate;
        break;
      }
    }
    if (route === undefined || match === null) {
      throw new HttpProblem(404, `No resource at ${req.path}.`);
    }
    if (req.method === 'OPTIONS' && cors?.answerPreflight(req, res, allowedMethods(route))) return;
    // HEAD is GET without a body (RFC 9110): routed, authenticated and validated as the GET it mirrors.
    if (req.method === 'HEAD' && !route.operations.has('HEAD') && route.operations.has('GET')) {
      headsRoutedAsGet.add(req);
      req.method = 'GET';
    }
    const operation = route.operations.get(req.method);
    if (operation === undefined)
      throw methodNotAllowed(req.method, route.template, allowedMethods(route));
    res.locals['operation'] = operation;
    if (route.parameters.length > 0) {
      const parameters: Record<string, string> = {};
      route.parameters.forEach((name, i) => (parameters[name] = match[i + 1]!));
      res.locals['pathParameters'] = parameters;
    }
    next();
  };
}
