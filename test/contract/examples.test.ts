import Ajv2020 from 'ajv/dist/2020';
import { deref, isNode, node, operationsOf, type Node } from '../../scripts/contract/openapi-walk';
import { loadSpec } from './support/spec';

const spec = loadSpec();

interface Site {
  readonly where: string;
  readonly schema: unknown;
  readonly examples: readonly unknown[];
  /** The HTTP status of the response the example belongs to, if any. */
  readonly status?: string;
}

const sites: Site[] = [];
const missing: string[] = [];

/** A media type, parameter or header: its `example`, or the values of its `examples`. */
function collect(where: string, holder: Node, status?: string): void {
  const examples =
    'example' in holder
      ? [holder['example']]
      : Object.values(node(holder['examples'])).map((e) => deref(spec, e)['value']);
  if (examples.length === 0) missing.push(where);
  else
    sites.push({
      where,
      schema: holder['schema'] ?? {},
      examples,
      ...(status === undefined ? {} : { status }),
    });
}

function collectContent(where: string, content: unknown, status?: string): void {
  for (const [type, media] of Object.entries(node(content))) {
    collect(`${where} ${type}`, node(media), status);
  }
}

for (const { method, template, item, operation } of operationsOf(spec).values()) {
  const where = `${method} ${template}`;
  for (const raw of [item['parameters'], operation['parameters']].flat()) {
    if (raw === undefined) continue;
    const parameter = deref(spec, raw);
    collect(`${where} parameter ${String(parameter['name'])}`, parameter);
  }
  collectContent(`${where} request`, deref(spec, operation['requestBody'])['content']);
  for (const [status, raw] of Object.entries(node(operation['responses']))) {
    const response = deref(spec, raw);
    collectContent(`${where} ${status}`, response['content'], status);
    for (const [name, header] of Object.entries(node(response['headers']))) {
      collect(`${where} ${status} header ${name}`, deref(spec, header));
    }
  }
}

/** `examples` inside the component schemas, each checked against the schema it sits in. */
function collectSchemaExamples(where: string, schema: unknown): void {
  if (Array.isArray(schema)) schema.forEach((s, i) => collectSchemaExamples(`${where}[${i}]`, s));
  if (!isNode(schema)) return;
  if (Array.isArray(schema['examples']))
    sites.push({ where, schema, examples: schema['examples'] });
  for (const [key, value] of Object.entries(schema)) {
    if (key !== 'examples') collectSchemaExamples(`${where}.${key}`, value);
  }
}
collectSchemaExamples('components.schemas', node(spec['components'])['schemas']);

// A plain JSON Schema 2020-12 validator: the component schemas become $defs of every schema checked.
const toDefs = (schema: unknown): Node =>
  JSON.parse(JSON.stringify(schema).replaceAll('"#/components/schemas/', '"#/$defs/')) as Node;
// Strict about unknown keywords and formats; not about `unevaluatedProperties` beside `allOf`
// without `type: object`, which is how the contract closes its composed schemas.
const ajv = new Ajv2020({ strict: true, strictTypes: false, allErrors: true });
ajv.addVocabulary(['example', 'externalDocs', 'xml']);
// Checked on the double an example becomes when read as JSON, as Swagger UI's "Try it out" reads it:
// an int64 example must stay within the range after that rounding (2^63 - 1 rounds to 2^63, out).
ajv.addFormat('int32', { type: 'number', validate: (n) => n >= -(2 ** 31) && n < 2 ** 31 });
ajv.addFormat('int64', { type: 'number', validate: (n) => n >= -(2 ** 63) && n < 2 ** 63 });
const $defs = toDefs(node(spec['components'])['schemas']);

describe('the examples in openapi.yaml', () => {
  it('cover every request body, parameter, response body and response header', () => {
    expect(missing).toStrictEqual([]);
    expect(sites.length).toBeGreaterThan(20);
  });

  it.each(sites.map((site) => [site.where, site] as const))(
    '%s: every example matches its schema',
    (_, site) => {
      const validate = ajv.compile({ ...toDefs(site.schema), $defs });
      const failures = site.examples.flatMap((example) =>
        validate(example) ? [] : [{ example, errors: ajv.errorsText(validate.errors) }],
      );
      expect(failures).toStrictEqual([]);
    },
  );

  it('give every error response an example whose `error` is its status', () => {
    const wrong = sites
      .filter((site) => site.status !== undefined && Number(site.status) >= 400)
      .flatMap((site) =>
        site.examples
          .filter((example) => node(example)['error'] !== Number(site.status))
          .map((example) => ({ where: site.where, example })),
      );
    expect(wrong).toStrictEqual([]);
  });
});
