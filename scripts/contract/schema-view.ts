import { deref, node, type Node } from './openapi-walk';

/** One schema, with `allOf` merged and `$ref`s followed, reduced to what the comparison reads. */
export interface View {
  /** `undefined`: any type. */
  readonly types: ReadonlySet<string> | undefined;
  /** `enum` or `const`; `undefined`: any value. */
  readonly values: readonly unknown[] | undefined;
  readonly lower: ReadonlyMap<string, number>;
  readonly upper: ReadonlyMap<string, number>;
  readonly multipleOf: number | undefined;
  /** `pattern ...` and `format ...`. */
  readonly texts: ReadonlySet<string>;
  readonly properties: ReadonlyMap<string, unknown>;
  readonly required: ReadonlySet<string>;
  /** Unknown properties refused (`additionalProperties` or `unevaluatedProperties` false). */
  readonly closed: boolean;
  readonly items: unknown;
  /** oneOf, anyOf, not... as JSON: compared only for equality. */
  readonly composite: string | undefined;
}

const LOWER = ['minLength', 'minimum', 'exclusiveMinimum', 'minItems', 'minProperties'];
const UPPER = ['maxLength', 'maximum', 'exclusiveMaximum', 'maxItems', 'maxProperties'];
const OPAQUE = ['oneOf', 'anyOf', 'not', 'if', 'patternProperties', 'prefixItems'];

export function same(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

function typesOf(schema: Node): Set<string> | undefined {
  const type = schema['type'];
  if (typeof type === 'string') return new Set([type]);
  return Array.isArray(type) ? new Set(type.map(String)) : undefined;
}

/** The schema and every `allOf` member in it, however deep, with `$ref`s followed. */
function partsOf(doc: Node, raw: unknown): Node[] {
  const parts = [deref(doc, raw)];
  for (let i = 0; i < parts.length; i++) {
    const allOf = parts[i]!['allOf'];
    if (Array.isArray(allOf)) parts.push(...allOf.map((member) => deref(doc, member)));
  }
  return parts;
}

/** Keeps the tightest of several limits: the highest lower bound, the lowest upper bound. */
function tighten(
  limits: Map<string, number>,
  keys: readonly string[],
  part: Node,
  tightest: (a: number, b: number) => number,
): void {
  for (const key of keys) {
    const limit = part[key];
    if (typeof limit !== 'number') continue;
    const earlier = limits.get(key);
    limits.set(key, earlier === undefined ? limit : tightest(limit, earlier));
  }
}

/** Reads a schema into a View. */
export function viewOf(doc: Node, raw: unknown): View {
  const parts = partsOf(doc, raw);
  let types: Set<string> | undefined;
  let values: unknown[] | undefined;
  let multipleOf: number | undefined;
  let items: unknown;
  const lower = new Map<string, number>();
  const upper = new Map<string, number>();
  const texts = new Set<string>();
  const properties = new Map<string, unknown>();
  const required = new Set<string>();
  const composites: unknown[] = [];
  for (const part of parts) {
    const own = typesOf(part);
    if (own !== undefined) {
      types = types === undefined ? own : new Set([...types].filter((t) => own.has(t)));
    }
    const allowed = 'const' in part ? [part['const']] : part['enum'];
    if (Array.isArray(allowed)) {
      values = (values ?? allowed).filter((v) => allowed.some((a) => same(a, v)));
    }
    tighten(lower, LOWER, part, Math.max);
    tighten(upper, UPPER, part, Math.min);
    if (typeof part['multipleOf'] === 'number') multipleOf = part['multipleOf'];
    if (typeof part['pattern'] === 'string') texts.add(`pattern ${part['pattern']}`);
    if (typeof part['format'] === 'string') texts.add(`format ${part['format']}`);
    for (const [name, schema] of Object.entries(node(part['properties']))) {
      const earlier = properties.get(name);
      properties.set(name, earlier === undefined ? schema : { allOf: [earlier, schema] });
    }
    for (const name of Array.isArray(part['required']) ? part['required'] : []) {
      required.add(String(name));
    }
    if (part['items'] !== undefined) items = part['items'];
    for (const key of OPAQUE) if (part[key] !== undefined) composites.push({ [key]: part[key] });
  }
  const closed = parts.some(
    (p) => p['additionalProperties'] === false || p['unevaluatedProperties'] === false,
  );
  const composite = composites.length === 0 ? undefined : JSON.stringify(composites);
  return {
    types,
    values,
    lower,
    upper,
    multipleOf,
    texts,
    properties,
    required,
    closed,
    items,
    composite,
  };
}
