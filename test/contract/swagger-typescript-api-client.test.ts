import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { cleanupChildren, startWithToken, type RunningServer } from '../support/server-process';
import { Api, type HttpResponse, type Error as PlantStoreError } from './generated/plant-store-api';
import type { Same } from './support/spec';

const CLIENT = path.join(__dirname, 'generated', 'plant-store-api.ts');

let server: RunningServer;
let token: string;

beforeAll(async () => {
  ({ server, token } = await startWithToken());
});

afterAll(cleanupChildren);

/** The generated client, with the token handed to its security worker (used by secured operations). */
function plantStore(secret?: string): Api<string> {
  const api = new Api<string>({
    baseUrl: server.baseUrl,
    securityWorker: (data) =>
      data === null ? {} : { headers: { Authorization: `Bearer ${data}` } },
  });
  if (secret !== undefined) api.setSecurityData(secret);
  return api;
}

/** The client throws the whole response when it is not 2xx; this returns it, typed. */
async function failure<D, E>(call: Promise<HttpResponse<D, E>>): Promise<HttpResponse<D, E>> {
  try {
    const response = await call;
    throw new Error(`Expected an error status, got ${response.status}.`);
  } catch (thrown) {
    if (thrown instanceof Response) return thrown as HttpResponse<D, E>;
    throw thrown;
  }
}

describe('the swagger-typescript-api client, against the running server', () => {
  it('creates a plant: 200 with the stored plant as data', async () => {
    const response = await plantStore(token).plants.createPlant({
      id: 201,
      name: 'Monstera deliciosa',
      tag: 'tropical',
    });

    expect(response.status).toBe(200);
    expect(response.data).toStrictEqual({ name: 'Monstera deliciosa', tag: 'tropical' });
  });

  it('refuses a taken id: 409 with the Error body, typed as the contract says', async () => {
    const api = plantStore(token);
    await api.plants.createPlant({ id: 202, name: 'Ficus lyrata' });

    const response = await failure(api.plants.createPlant({ id: 202, name: 'Again' }));

    const typed: Same<typeof response.error, PlantStoreError> = true;
    expect(typed).toBe(true);
    expect(response.status).toBe(409);
    expect(response.error).toStrictEqual({
      error: 409,
      message: 'A plant with the id 202 already exists.',
    });
  });

  it('deletes a plant: 204, then 404 with the typed Error body once it is gone', async () => {
    const api = plantStore(token);
    await api.plants.createPlant({ id: 203, name: 'Pilea' });

    const first = await api.plants.deletePlant(203);
    // Operations without a success body parse no error body unless asked to.
    const second = await failure(api.plants.deletePlant(203, { format: 'json' }));

    expect(first.status).toBe(204);
    const typed: Same<typeof second.error, PlantStoreError> = true;
    expect(typed).toBe(true);
    expect(second.status).toBe(404);
    expect(second.error).toStrictEqual({ error: 404, message: 'No plant has the id 203.' });
  });

  it('sends no token: 401 with the Error body and a bearer challenge', async () => {
    const response = await failure(plantStore().plants.createPlant({ id: 204, name: 'Calathea' }));

    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toBe('Bearer realm="plants"');
    expect(response.error).toStrictEqual({
      error: 401,
      message: 'A valid bearer token is required in the Authorization header.',
    });
  });
});

describe('the generated client source', () => {
  // The generator marks its output `// @ts-nocheck`, which would make "it compiles" say nothing:
  // the file is checked here without that line, strictly, with the DOM types a fetch client needs.
  it('type-checks under strict settings with its @ts-nocheck line ignored', () => {
    const source = fs.readFileSync(CLIENT, 'utf8');
    expect(source).toContain('// @ts-nocheck');
    const options: ts.CompilerOptions = {
      strict: true,
      noUncheckedIndexedAccess: true,
      exactOptionalPropertyTypes: true,
      noImplicitOverride: true,
      noEmit: true,
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.Node16,
      moduleResolution: ts.ModuleResolutionKind.Node16,
      lib: ['lib.es2022.d.ts', 'lib.dom.d.ts'],
      types: [],
    };
    const host = ts.createCompilerHost(options);
    const readFile = host.readFile.bind(host);
    host.readFile = (file) =>
      path.resolve(file) === CLIENT ? source.replace('// @ts-nocheck', '') : readFile(file);
    const program = ts.createProgram([CLIENT], options, host);

    const problems = ts
      .getPreEmitDiagnostics(program)
      .map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));

    expect(problems).toStrictEqual([]);
  }, 60_000);
});
