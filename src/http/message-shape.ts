import { IncomingMessage, ServerResponse } from 'node:http';
import type { Express } from 'express';

/**
 * The properties that Express (its handle, router and parseurl), passport's authenticate, this
 * app (the authenticated principal, the parsed body) and express-openapi-validator add to every
 * request, in the order they add them.
 */
export const REQUEST_FIELDS = [
  'res',
  'next',
  'baseUrl',
  'originalUrl',
  '_parsedUrl',
  'params',
  'logIn',
  'login',
  'logOut',
  'logout',
  'isAuthenticated',
  'isUnauthenticated',
  '_sessionManager',
  'user',
  'body',
  'openapi',
] as const;

/** The same for responses: Express's locals, and the status Node keeps on the prototype until it is set. */
export const RESPONSE_FIELDS = ['locals', 'statusCode', 'statusMessage'] as const;

type Preset<Fields extends readonly string[]> = Record<Fields[number], unknown>;

/**
 * Gives each request and response, first thing, every property that the packages add to it later,
 * with the value it would have had until then (undefined; a status of 200), so that their later
 * assignments overwrite a property instead of adding one.
 *
 * V8 gives an object a new hidden class with each property added. Added one by one at a dozen sites
 * inside the packages, each seeing objects of many shapes, the additions went through V8's generic
 * paths, which allocate: passport's seven additions alone were a sixth of the bytes a request
 * allocated. Added here, at one site that always sees the same shape, they are cheap, and the
 * objects keep one shape through the pipeline: 1.4x the requests per second of the same build
 * without it (npm run bench:compare). The assignments are written out one by one on purpose: a
 * loop over names would be a keyed store, which V8 treats as generically as before.
 * test/http/message-shape.test.ts checks that no other property is added on the way.
 */
function preset(req: IncomingMessage, res: ServerResponse): void {
  const request = req as unknown as Preset<typeof REQUEST_FIELDS>;
  request.res = undefined;
  request.next = undefined;
  request.baseUrl = undefined;
  request.originalUrl = undefined;
  request._parsedUrl = undefined;
  request.params = undefined;
  request.logIn = undefined;
  request.login = undefined;
  request.logOut = undefined;
  request.logout = undefined;
  request.isAuthenticated = undefined;
  request.isUnauthenticated = undefined;
  request._sessionManager = undefined;
  request.user = undefined;
  request.body = undefined;
  request.openapi = undefined;
  const response = res as unknown as Preset<typeof RESPONSE_FIELDS>;
  response.locals = undefined;
  response.statusCode = 200;
  response.statusMessage = undefined;
}

type Handle = (req: IncomingMessage, res: ServerResponse, callback?: unknown) => void;

/** Makes the app preset every request's and response's fields before Express sees them (see preset). */
export function presetMessageFields(app: Express): void {
  const target = app as unknown as { handle: Handle };
  const handle = target.handle;
  target.handle = function handleWithPresetFields(req, res, callback) {
    preset(req, res);
    handle.call(this, req, res, callback);
  };
}

/** The request and response classes that createHttpServer hands to node:http; see expressMessageClasses. */
export interface MessageClasses {
  readonly IncomingMessage: typeof IncomingMessage;
  readonly ServerResponse: typeof ServerResponse;
}

/**
 * Puts `successor` in `current`'s place as a prototype: the same parent, and the same own
 * properties (Express's `app`), so that objects made with `successor` behave as if made with
 * `current`.
 */
function takePlace(successor: object, current: object): void {
  Object.setPrototypeOf(successor, Object.getPrototypeOf(current) as object | null);
  for (const key of Reflect.ownKeys(current)) {
    if (key === 'constructor') continue;
    Object.defineProperty(successor, key, Reflect.getOwnPropertyDescriptor(current, key)!);
  }
}

/**
 * Request and response classes for node:http whose objects are born with the app's prototypes:
 * each class's prototype takes the place of app.request / app.response (same parent, same own
 * properties), and becomes it.
 *
 * Express gives every request and response the app's prototypes with Object.setPrototypeOf,
 * first thing in app.handle. On objects that Node made with its own prototypes, that kept what a
 * request allocated alive: under POST load, 30% to 45% of the young generation survived each
 * young collection and most of it was moved to the old generation, where only a full collection
 * frees it; scavenges took 8 to 33 ms each. Bare Express does the same (251 MB of 891 MB moved to
 * the old generation in 10 s), and bare node:http with one setPrototypeOf per request too, so it
 * is the call, not the packages. Objects born with these prototypes make Express's call a no-op
 * (V8 returns at once when the prototype is already the one asked for): 1.9% survived, and the
 * service answered 1.5x the POSTs per second with half the p99 (scripts/bench/README.md, "What
 * changed").
 *
 * Subclasses rather than functions that call Node's constructors on an object whose prototype is
 * app.request: V8 sizes an object for the properties its constructor chain assigns, and follows
 * that chain only through classes, so the functions' objects held Node's twenty-odd properties
 * out of line and cost 5.7 KB more per request on bare node:http (13.2 against 7.5 KB).
 */
export function expressMessageClasses(app: Express): MessageClasses {
  class ExpressRequest extends IncomingMessage {}
  class ExpressResponse extends ServerResponse {}
  takePlace(ExpressRequest.prototype, app.request);
  takePlace(ExpressResponse.prototype, app.response);
  app.request = ExpressRequest.prototype as unknown as Express['request'];
  app.response = ExpressResponse.prototype as unknown as Express['response'];
  return {
    IncomingMessage: ExpressRequest,
    ServerResponse: ExpressResponse as typeof ServerResponse,
  };
}
