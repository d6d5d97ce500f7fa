import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  contractJson,
  loadOpenApiDocument,
  writeContractCache,
} from '../../src/http/openapi-document';
import { SPEC_PATH } from '../support/test-app';

describe('loadOpenApiDocument and the contract cache of npm run build', () => {
  let dir: string;
  let spec: string;
  let cache: string;

  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'contract-cache-'));
    spec = path.join(dir, 'openapi.yaml');
    cache = path.join(dir, 'contract-cache.json');
    fs.copyFileSync(SPEC_PATH, spec);
  });

  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('gives from the cache the same document as from parsing the YAML', () => {
    const parsed = loadOpenApiDocument(spec);
    writeContractCache(spec, cache);

    const cached = loadOpenApiDocument(spec, cache);

    expect(cached.json).toBe(parsed.json);
    expect(cached.spec).toStrictEqual(parsed.spec);
    expect(cached.routes.map((route) => route.template)).toStrictEqual(
      parsed.routes.map((route) => route.template),
    );
    expect(cached.json).toContain('9223372036854775807');
  });

  it('reads the JSON from a cache whose hash is that of the file, without parsing the YAML', () => {
    writeContractCache(spec, cache);
    const written = JSON.parse(fs.readFileSync(cache, 'utf8')) as { json: string };
    const marked = written.json.replace('"title":"Plant Store"', '"title":"From the cache"');
    expect(marked).not.toBe(written.json);
    fs.writeFileSync(cache, JSON.stringify({ ...written, json: marked }));

    const document = loadOpenApiDocument(spec, cache);

    expect((document.spec['info'] as { title: string }).title).toBe('From the cache');
  });

  it('ignores a cache written from another text of the file', () => {
    writeContractCache(spec, cache);
    const edited = fs
      .readFileSync(spec, 'utf8')
      .replace(/^(\s+title:).*$/m, '$1 The plant store, edited');
    fs.writeFileSync(spec, edited);

    const document = loadOpenApiDocument(spec, cache);

    expect((document.spec['info'] as { title: string }).title).toBe('The plant store, edited');
    expect(document.json).toContain('"The plant store, edited"');
  });

  it.each([
    ['missing', undefined],
    ['not JSON', 'not json'],
    ['of the wrong shape', '{"yamlSha256": 1}'],
  ])('parses the YAML when the cache is %s', (_, content) => {
    if (content !== undefined) fs.writeFileSync(cache, content);

    expect(loadOpenApiDocument(spec, cache).json).toBe(loadOpenApiDocument(spec).json);
  });

  it('converts the YAML to JSON with integers beyond 2^53 exact, as written', () => {
    const yaml = 'a: 9223372036854775807\nb: [-9223372036854775808, 9007199254740993, 1.5, 42]\n';

    expect(contractJson(yaml)).toBe(
      '{"a":9223372036854775807,"b":[-9223372036854775808,9007199254740993,1.5,42]}',
    );
  });

  it('reads which operations declare query parameters, through local $refs, and refuses a $ref it cannot resolve', () => {
    const operation = (parameters: string) =>
      `openapi: 3.0.3
info: { title: t, version: '1' }
paths:
  /things:
    get:
      operationId: listThings
      parameters: ${parameters}
      responses: { '200': { description: ok } }
components:
  parameters:
    Limit: { name: limit, in: query, schema: { type: integer } }
    Alias: { $ref: '#/components/parameters/Limit' }
`;
    const takesQuery = (parameters: string) => {
      fs.writeFileSync(spec, operation(parameters));
      return loadOpenApiDocument(spec).routes[0]!.operations.get('GET')!.takesQuery;
    };

    expect(takesQuery('[]')).toBe(false);
    expect(takesQuery('[{ name: id, in: header, schema: { type: string } }]')).toBe(false);
    expect(takesQuery("[{ $ref: '#/components/parameters/Alias' }]")).toBe(true);
    expect(() => takesQuery("[{ $ref: 'other.yaml#/Limit' }]")).toThrow(/other\.yaml/);
    expect(() => takesQuery("[{ $ref: '#/components/parameters/Missing' }]")).toThrow(
      /does not resolve/,
    );
  });
});
