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

/** The request and response constructors that createHttpServer hands to node:http; see expressMessageClasses. */
export interface MessageClasses {
  readonly IncomingMessage: typeof IncomingMessage;
  readonly ServerResponse: typeof ServerResponse;
}

/**
 * Constructors for node:http whose requests and responses are born with the app's prototypes
 * (app.request, app.response), each a plain call of Node's own constructor on the new object.
 *
 * Express gives every request and response the app's prototypes with Object.setPrototypeOf,
 * first thing in app.handle. On objects that Node made with its own prototypes, that kept what a
 * request allocated alive: under POST load, 30% to 45% of the young generation survived each
 * young collection and most of it was moved to the old generation, where only a full collection
 * frees it; scavenges took 8 to 33 ms each. Bare Express does the same (251 MB of 891 MB moved to
 * the old generation in 10 s), and bare node:http with one setPrototypeOf per request too, so it
 * is the call, not the packages. Objects born with these prototypes make Express's call a no-op
 * (V8 returns at once when the prototype is already the one asked for): 1.9% survived, and the
 * service answered 1.5x the POSTs per second with half the p99 (README "Performance"). A function
 * that calls Node's constructor, rather than a class that extends it, because a class cannot take
 * app.request as its prototype. Node's two constructors are plain functions (in Node 20 and in
 * Node's current source); were one to become a class, Reflect.apply would throw on every request,
 * which every end-to-end test would show.
 */
export function expressMessageClasses(app: Express): MessageClasses {
  function ExpressRequest(this: IncomingMessage, ...args: unknown[]): void {
    Reflect.apply(IncomingMessage, this, args);
  }
  ExpressRequest.prototype = app.request;
  function ExpressResponse(this: ServerResponse, ...args: unknown[]): void {
    Reflect.apply(ServerResponse, this, args);
  }
  ExpressResponse.prototype = app.response;
  return {
    IncomingMessage: ExpressRequest as unknown as typeof IncomingMessage,
    ServerResponse: ExpressResponse as unknown as typeof ServerResponse,
  };
}
