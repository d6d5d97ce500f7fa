import path from 'node:path';
import type { RequestHandler } from 'express';
import * as OpenApiValidator from 'express-openapi-validator';
import type { OpenApiDocument } from './openapi-document';

type PathToRegexp = (path: unknown, options?: Record<string, unknown>) => unknown;

/** Options that hold `sensitive` and `strict` at most (the validator's), which path-to-regexp reads by truthiness. */
function onlySensitiveStrict(options: Record<string, unknown> | undefined): boolean {
  for (const name in options) if (name !== 'sensitive' && name !== 'strict') return false;
  return true;
}

/** A module as express-openapi-validator loads it: resolved from the validator's own location. */
export function validatorsModule<M>(request: string): M {
  const validatorEntry = require.resolve('express-openapi-validator');
  const file = request.startsWith('.')
    ? path.join(path.dirname(validatorEntry), request)
    : require.resolve(request, { paths: [validatorEntry] });
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- the very instance the validator uses
  return require(file) as M;
}

/**
 * express-openapi-validator 5.6 looks a request's route up by compiling every route path with
 * path-to-regexp's `pathToRegexp` on every request (its `lookupRoute`; upstream pull request
 * "perf: cache route matchers", #1217, is still open). That compile was a twentieth of a request's
 * CPU here. `pathToRegexp` is a pure function of a string path and its options, and the validator
 * only reads the result, so the validator's copy of it is memoized for the calls the validator
 * makes (a string path, `sensitive`/`strict` options); any other call is passed through uncached.
 */
function memoizeRouteCompilation(): void {
  const pathToRegexpModule = validatorsModule<{ pathToRegexp: PathToRegexp }>('path-to-regexp');
  const compile = pathToRegexpModule.pathToRegexp;
  /** By path: the result for each of the four truth values of (sensitive, strict). */
  const compiled = new Map<string, unknown[]>();
  pathToRegexpModule.pathToRegexp = (path, options) => {
    if (typeof path !== 'string' || !onlySensitiveStrict(options)) return compile(path, options);
    const variant = (options?.['sensitive'] ? 2 : 0) + (options?.['strict'] ? 1 : 0);
    let results = compiled.get(path);
    if (results === undefined) {
      results = [];
      compiled.set(path, results);
    }
    return (results[variant] ??= compile(path, options));
  };
}

/** express-openapi-validator's checker of an API document against the OpenAPI schema. */
interface DocumentChecker {
  validate(document: unknown): { errors: unknown[] };
}
type DocumentCheckerOptions = { version: string; validateApiSpec: boolean };
type DocumentCheckerClass = new (options: DocumentCheckerOptions) => DocumentChecker;

/**
 * express-openapi-validator 5.6 builds its checker of the API document at every start, compiling
 * the whole OpenAPI 3 schema with Ajv, and with `validateApiSpec: false` never uses it (its
 * OpenAPIFramework constructs the checker, then skips `validate`). That compile was a quarter of
 * the service's start-up. The checker class it constructs is replaced by one that compiles on its
 * first `validate`, so that whoever does check a document with it gets the same answers
 * (test/http/validator.test.ts checks the contract with it).
 */
function deferDocumentChecker(): void {
  const checkerModule = validatorsModule<{ OpenAPISchemaValidator: DocumentCheckerClass }>(
    './framework/openapi.schema.validator.js',
  );
  const EagerChecker = checkerModule.OpenAPISchemaValidator;
  checkerModule.OpenAPISchemaValidator = class LazyDocumentChecker implements DocumentChecker {
    #checker: DocumentChecker | undefined;
    constructor(private readonly options: DocumentCheckerOptions) {}
    validate(document: unknown): { errors: unknown[] } {
      this.#checker ??= new EagerChecker(this.options);
      return this.#checker.validate(document);
    }
  };
}

let patched = false;

/** The two changes above, made once per process (the validator's modules are shared). */
function patchValidatorOnce(): void {
  if (patched) return;
  patched = true;
  memoizeRouteCompilation();
  deferDocumentChecker();
}

/**
 * express-openapi-validator over the contract: request shapes always, response shapes when asked
 * (on in tests). Its middleware list runs inside the request pipeline.
 */
export function createValidator(
  document: OpenApiDocument,
  validateResponses: boolean,
): RequestHandler[] {
  patchValidatorOnce();
  return OpenApiValidator.middleware({
    apiSpec: structuredClone(document.spec) as never,
    validateRequests: { allowUnknownQueryParameters: false, coerceTypes: false },
    validateResponses,
    // Authentication is passport's job, before the body is read; the validator checks shapes only.
    validateSecurity: false,
    // The route gate has already answered 404/405; HEAD of a GET operation is not in the contract's paths.
    ignoreUndocumented: true,
    // Only application/json bodies reach it (the body reader answers 415 to any other type).
    fileUploader: false,
    // Checking the contract against the OpenAPI schema took a sixth of start-up on every start; the
    // contract is checked where it changes instead: in CI, by redocly and by the validator's own
    // checker (test/http/validator.test.ts). Building that checker is deferred too (see above).
    validateApiSpec: false,
  }) as RequestHandler[];
}
