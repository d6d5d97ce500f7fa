import { loadOpenApiDocument } from '../../src/http/openapi-document';
import { createValidator, validatorsModule } from '../../src/http/validator';
import { SPEC_PATH } from '../support/test-app';

type Compile = (path: unknown, options?: Record<string, unknown>) => unknown;

function validatorsPathToRegexp(): { pathToRegexp: Compile } {
  return validatorsModule('path-to-regexp');
}

describe('the validator route lookup', () => {
  beforeAll(() => {
    createValidator(loadOpenApiDocument(SPEC_PATH), false);
  });

  it('compiles a route path once for each truth value of its options', () => {
    const { pathToRegexp } = validatorsPathToRegexp();
    const first = pathToRegexp('/plants/:id', { sensitive: true, strict: true });
    expect(pathToRegexp('/plants/:id', { sensitive: true, strict: true })).toBe(first);
    expect(pathToRegexp('/plants/:id', { sensitive: false, strict: true })).not.toBe(first);
    expect(pathToRegexp('/plants', { sensitive: true, strict: true })).not.toBe(first);
    expect(pathToRegexp('/plants/:id', { sensitive: 1, strict: 'yes' })).toBe(first);
  });

  it('still matches as path-to-regexp does', () => {
    const { pathToRegexp } = validatorsPathToRegexp();
    const { regexp, keys } = pathToRegexp('/plants/:id', { sensitive: true }) as {
      regexp: RegExp;
      keys: { name: string }[];
    };
    expect(regexp.exec('/plants/42')?.[1]).toBe('42');
    expect(regexp.exec('/PLANTS/42')).toBeNull();
    expect(keys.map((key) => key.name)).toEqual(['id']);
  });

  it('leaves calls with other options uncached', () => {
    const { pathToRegexp } = validatorsPathToRegexp();
    const options = { end: false };
    expect(pathToRegexp('/plants/:id', options)).not.toBe(pathToRegexp('/plants/:id', options));
  });
});

/**
 * The service starts its validator without re-checking the contract against the OpenAPI schema
 * (a fifth of start-up) and without building the checker that would (a quarter of what was
 * left); the contract is checked here instead, with the validator's own checker.
 */
describe('the contract, as express-openapi-validator checks an API document', () => {
  type Checker = new (options: { version: string; validateApiSpec: boolean }) => {
    validate(document: unknown): { errors: unknown[] };
  };

  function checkerClass(): Checker {
    return validatorsModule<{ OpenAPISchemaValidator: Checker }>(
      './framework/openapi.schema.validator.js',
    ).OpenAPISchemaValidator;
  }

  function checker(): InstanceType<Checker> {
    const { spec } = loadOpenApiDocument(SPEC_PATH);
    return new (checkerClass())({ version: String(spec['openapi']), validateApiSpec: true });
  }

  it('is built by the validator only when a document is checked, not at start', () => {
    createValidator(loadOpenApiDocument(SPEC_PATH), false);

    expect(checkerClass().name).toBe('LazyDocumentChecker');
  });

  it('finds no error in openapi.yaml', () => {
    expect(checker().validate(loadOpenApiDocument(SPEC_PATH).spec).errors).toStrictEqual([]);
  });

  it('finds the error in a copy whose operationId is a number', () => {
    const spec = structuredClone(loadOpenApiDocument(SPEC_PATH).spec) as {
      paths: Record<string, Record<string, Record<string, unknown>>>;
    };
    spec.paths['/plants']!['post']!['operationId'] = 5;

    expect(checker().validate(spec).errors).not.toStrictEqual([]);
  });
});
