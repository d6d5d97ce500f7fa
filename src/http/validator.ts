import type { RequestHandler } from 'express';
import * as OpenApiValidator from 'express-openapi-validator';
import type { OpenApiDocument } from './openapi-document';

type PathToRegexp = (path: unknown, options?: Record<string, unknown>) => unknown;

/** The options path-to-regexp 8 reads whose values are plain data, so equal values compile alike. */
const PLAIN_OPTIONS = new Set(['sensitive', 'strict', 'end', 'trailing', 'delimiter']);

let memoized = false;

/**
 * express-openapi-validator 5.6 looks a request's route up by compiling every route path with
 * path-to-regexp's `pathToRegexp` on every request (its `lookupRoute`; upstream pull request
 * "perf: cache route matchers", #1217, is still open). That compile was a twentieth of a request's
 * CPU here. `pathToRegexp` is a pure function of a string path and plain options, and the
 * validator only reads the result, so the validator's copy of it is memoized: once, for those
 * calls alone, leaving any other call (a token array, an `encodePath` function) uncached.
 */
function memoizeRouteCompilation(): void {
  if (memoized) return;
  memoized = true;
  const validatorEntry = require.resolve('express-openapi-validator');
  const moduleFile = require.resolve('path-to-regexp', { paths: [validatorEntry] });
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- the copy the validator loads, found from its location
  const pathToRegexpModule = require(moduleFile) as { pathToRegexp: PathToRegexp };
  const compile = pathToRegexpModule.pathToRegexp;
  const compiled = new Map<string, unknown>();
  pathToRegexpModule.pathToRegexp = (path, options) => {
    let key = typeof path === 'string' ? path : undefined;
    for (const name in options) {
      if (key === undefined) break;
      const value = options[name];
      key =
        PLAIN_OPTIONS.has(name) && typeof value !== 'object' && typeof value !== 'function'
          ? `${key}\0${name}=${String(value)}`
          : undefined;
    }
    if (key === undefined) return compile(path, options);
    let result = compiled.get(key);
    if (result === undefined) {
      result = compile(path, options);
      compiled.set(key, result);
    }
    return result;
  };
}

/**
 * express-openapi-validator over the contract: request shapes always, response shapes when asked
 * (on in tests). Its middleware list runs inside the request pipeline.
 */
export function createValidator(
  document: OpenApiDocument,
  validateResponses: boolean,
): RequestHandler[] {
  memoizeRouteCompilation();
  return OpenApiValidator.middleware({
    apiSpec: structuredClone(document.spec) as never,
    validateRequests: { allowUnknownQueryParameters: false, coerceTypes: false },
    validateResponses,
    // Authentication is passport's job, before the body is read; the validator checks shapes only.
    validateSecurity: false,
    // The route gate has already answered 404/405; HEAD of a GET operation is not in the contract's paths.
    ignoreUndocumented: true,
  }) as RequestHandler[];
}
