import { findBreakingChanges } from '../../scripts/contract/breaking-changes';
import { loadSpec } from './support/spec';

type Obj = Record<string, unknown>;

/** The object at `path` inside `doc`, for editing in place. */
function at(doc: Obj, ...path: string[]): Obj {
  let found: unknown = doc;
  for (const key of path) found = (found as Obj)[key];
  if (typeof found !== 'object' || found === null) throw new Error(`Nothing at ${path.join('.')}`);
  return found as Obj;
}

const schemas = (doc: Obj) => at(doc, 'components', 'schemas');
const newPlantOwn = (doc: Obj) => at(schemas(doc), 'NewPlant', 'allOf', '1');

/** The findings for the contract after `edit`. */
function changesAfter(edit: (doc: Obj) => void): string[] {
  const before = loadSpec();
  const after = structuredClone(before) as Obj;
  edit(after);
  return findBreakingChanges(before, after);
}

describe('findBreakingChanges on known breaking edits', () => {
  it.each<[string, (doc: Obj) => void, string]>([
    [
      'removing an operation',
      (d) => delete at(d, 'paths', '/plants/{id}')['delete'],
      'DELETE /plants/{id}: operation removed',
    ],
    ['removing a path', (d) => delete at(d, 'paths')['/readyz'], 'GET /readyz: operation removed'],
    [
      'removing a response',
      (d) => delete at(d, 'paths', '/plants', 'post', 'responses')['409'],
      'POST /plants response 409: removed',
    ],
    [
      'adding a required request field',
      (d) => {
        at(newPlantOwn(d), 'properties')['colour'] = { type: 'string' };
        newPlantOwn(d)['required'] = ['id', 'colour'];
      },
      'POST /plants request body application/json.colour: new required request field',
    ],
    [
      'making an optional request field required',
      (d) => (at(schemas(d), 'PlantFields')['required'] = ['name', 'tag']),
      'POST /plants request body application/json.tag: new required request field',
    ],
    [
      'changing a request field type',
      (d) => (at(newPlantOwn(d), 'properties', 'id')['type'] = 'string'),
      'POST /plants request body application/json.id: type changed from integer to string',
    ],
    [
      'widening a response field type',
      (d) => (at(schemas(d), 'Error', 'properties', 'error')['type'] = 'number'),
      'POST /plants response 400 application/json.error: type changed from integer to number',
    ],
    [
      'lowering a request maxLength',
      (d) => (at(schemas(d), 'PlantFields', 'properties', 'name')['maxLength'] = 100),
      'POST /plants request body application/json.name: maxLength 255 → 100',
    ],
    [
      'adding a pattern to a request field',
      (d) => (at(schemas(d), 'PlantFields', 'properties', 'tag')['pattern'] = '^[a-z]+$'),
      'POST /plants request body application/json.tag: added pattern ^[a-z]+$',
    ],
    [
      'removing a value from a request enum',
      (d) => {
        const file = at(d, 'paths', '/docs/assets/{file}', 'get', 'parameters', '0', 'schema');
        file['enum'] = ['swagger-ui.css', 'swagger-ui-bundle.js'];
      },
      'GET /docs/assets/{file} parameter file: now refuses "docs.js"',
    ],
    [
      'removing a field',
      (d) => delete at(schemas(d), 'PlantFields', 'properties')['tag'],
      'POST /plants response 200 application/json.tag: response field removed',
    ],
    [
      'removing a field from a closed request schema',
      (d) => delete at(schemas(d), 'PlantFields', 'properties')['tag'],
      'POST /plants request body application/json.tag: request field removed; sending it is now refused',
    ],
    [
      'making a response field optional',
      (d) => (at(schemas(d), 'PlantFields')['required'] = []),
      'POST /plants response 200 application/json.name: response field no longer required',
    ],
    [
      'widening a response enum',
      (d) => {
        const status = at(schemas(d), 'Health', 'properties', 'status');
        delete status['const'];
        status['enum'] = ['ok', 'degraded'];
      },
      'GET /healthz response 200 application/json.status: may now answer "degraded"',
    ],
    [
      'removing a response media type',
      (d) => {
        const content = at(d, 'paths', '/openapi.yaml', 'get', 'responses', '200', 'content');
        content['text/yaml'] = content['application/yaml'];
        delete content['application/yaml'];
      },
      'GET /openapi.yaml response 200: media type application/yaml removed',
    ],
    [
      'removing a response header',
      (d) => delete at(d, 'components', 'responses', 'Unauthorized')['headers'],
      'POST /plants response 401 header WWW-Authenticate: removed',
    ],
    [
      'adding a required query parameter',
      (d) =>
        (at(d, 'paths', '/healthz', 'get')['parameters'] = [
          { name: 'verbose', in: 'query', required: true, schema: { type: 'boolean' } },
        ]),
      'GET /healthz parameter query verbose: new required parameter',
    ],
    [
      'requiring a token on a public operation',
      (d) => delete at(d, 'paths', '/healthz', 'get')['security'],
      'GET /healthz: now requires authentication',
    ],
    [
      'changing the security scheme',
      (d) => (at(d, 'components', 'securitySchemes', 'bearerAuth')['scheme'] = 'basic'),
      'security scheme bearerAuth: type, scheme or location changed',
    ],
    [
      'renaming an operationId',
      (d) => (at(d, 'paths', '/plants', 'post')['operationId'] = 'addPlant'),
      'POST /plants: operationId createPlant → addPlant',
    ],
  ])('%s is reported', (_, edit, finding) => {
    expect(changesAfter(edit)).toContain(finding);
  });
});

describe('findBreakingChanges on known compatible edits', () => {
  it.each<[string, (doc: Obj) => void]>([
    ['no edit', () => undefined],
    [
      'adding an optional request field',
      (d) => (at(newPlantOwn(d), 'properties')['note'] = { type: 'string' }),
    ],
    [
      'adding a field',
      (d) => (at(schemas(d), 'PlantFields', 'properties')['colour'] = { type: 'string' }),
    ],
    [
      'adding an operation',
      (d) =>
        (at(d, 'paths', '/plants/{id}')['get'] = {
          operationId: 'getPlant',
          responses: { '200': { description: 'The plant.' } },
        }),
    ],
    [
      'adding a response',
      (d) =>
        (at(d, 'paths', '/healthz', 'get', 'responses')['503'] = {
          $ref: '#/components/responses/ServiceUnavailable',
        }),
    ],
    [
      'adding a value to a request enum',
      (d) => {
        const file = at(d, 'paths', '/docs/assets/{file}', 'get', 'parameters', '0', 'schema');
        file['enum'] = [...(file['enum'] as string[]), 'favicon.png'];
      },
    ],
    [
      'adding an optional query parameter',
      (d) =>
        (at(d, 'paths', '/healthz', 'get')['parameters'] = [
          { name: 'verbose', in: 'query', schema: { type: 'boolean' } },
        ]),
    ],
    ['making a request field optional', (d) => (newPlantOwn(d)['required'] = [])],
    [
      'renaming a path parameter',
      (d) => {
        const paths = at(d, 'paths');
        const item = at(paths, '/plants/{id}');
        at(item, 'delete', 'parameters', '0')['name'] = 'plantId';
        paths['/plants/{plantId}'] = item;
        delete paths['/plants/{id}'];
      },
    ],
    [
      'rewording descriptions and examples',
      (d) => {
        at(d, 'info')['description'] = 'Plants.';
        at(d, 'paths', '/plants', 'post')['summary'] = 'Store a plant';
        at(schemas(d), 'PlantFields', 'properties', 'name')['examples'] = ['Ficus'];
      },
    ],
    [
      'making a public operation public in another way',
      (d) => (at(d, 'paths', '/healthz', 'get')['security'] = [{}]),
    ],
  ])('%s is not reported', (_, edit) => {
    expect(changesAfter(edit)).toStrictEqual([]);
  });
});
