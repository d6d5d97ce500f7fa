import createClient from 'openapi-fetch';
import type { components, paths } from '../../generated/openapi';
import { cleanupChildren, startWithToken, type RunningServer } from '../support/server-process';
import type { Same } from './support/spec';

type PlantStoreError = components['schemas']['Error'];

let server: RunningServer;
let token: string;

beforeAll(async () => {
  ({ server, token } = await startWithToken());
});

afterAll(cleanupChildren);

/** The client a reader of README writes: openapi-fetch over generated/openapi.d.ts. */
function plantStore(authorization?: string) {
  return createClient<paths>({
    baseUrl: server.baseUrl,
    headers: authorization === undefined ? {} : { Authorization: authorization },
  });
}

describe('openapi-fetch over the openapi-typescript types, against the running server', () => {
  it('creates a plant: 200 with the stored plant as data', async () => {
    const { data, error, response } = await plantStore(`Bearer ${token}`).POST('/plants', {
      body: { id: 101, name: 'Monstera deliciosa', tag: 'tropical' },
    });

    expect(response.status).toBe(200);
    expect(error).toBeUndefined();
    expect(data).toStrictEqual({ name: 'Monstera deliciosa', tag: 'tropical' });
  });

  it('refuses a taken id: 409 with the Error body, typed as the contract says', async () => {
    const client = plantStore(`Bearer ${token}`);
    await client.POST('/plants', { body: { id: 102, name: 'Ficus lyrata' } });

    const { data, error, response } = await client.POST('/plants', {
      body: { id: 102, name: 'Again' },
    });

    const typed: Same<typeof error, PlantStoreError | undefined> = true;
    expect(typed).toBe(true);
    expect(response.status).toBe(409);
    expect(data).toBeUndefined();
    expect(error).toStrictEqual({ error: 409, message: 'A plant with the id 102 already exists.' });
  });

  it('deletes a plant: 204, then 404 with the typed Error body once it is gone', async () => {
    const client = plantStore(`Bearer ${token}`);
    await client.POST('/plants', { body: { id: 103, name: 'Pilea' } });
    const remove = () => client.DELETE('/plants/{id}', { params: { path: { id: 103 } } });

    const first = await remove();
    const second = await remove();

    expect(first.response.status).toBe(204);
    expect(first.error).toBeUndefined();
    const typed: Same<typeof second.error, PlantStoreError | undefined> = true;
    expect(typed).toBe(true);
    expect(second.response.status).toBe(404);
    expect(second.error).toStrictEqual({ error: 404, message: 'No plant has the id 103.' });
  });

  it('sends no token: 401 with the Error body and a bearer challenge', async () => {
    const { error, response } = await plantStore().POST('/plants', {
      body: { id: 104, name: 'Calathea' },
    });

    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toBe('Bearer realm="plants"');
    expect(error).toStrictEqual({
      error: 401,
      message: 'A valid bearer token is required in the Authorization header.',
    });
  });
});
