/** A parsed OpenAPI document or any part of it, as plain JSON. */
export type Node = Readonly<Record<string, unknown>>;

export const EMPTY: Node = Object.freeze({});

export function isNode(value: unknown): value is Node {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function node(value: unknown): Node {
  return isNode(value) ? value : EMPTY;
}

/** Follows internal `$ref`s (`#/...`) to the object they name; anything else is returned as is. */
export function deref(doc: Node, value: unknown, depth = 0): Node {
  const object = node(value);
  const ref = object['$ref'];
  if (typeof ref !== 'string') return object;
  if (!ref.startsWith('#/')) throw new Error(`Only internal $refs are supported, not ${ref}.`);
  if (depth > 32) throw new Error(`The $ref ${ref} does not resolve (a cycle?).`);
  let target: unknown = doc;
  for (const part of ref.slice(2).split('/')) {
    target = node(target)[part.replace(/~1/g, '/').replace(/~0/g, '~')];
  }
  if (target === undefined) throw new Error(`The $ref ${ref} names nothing.`);
  return deref(doc, target, depth + 1);
}

export const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

/** `/plants/{id}` → `/plants/{}`: two templates that differ only in parameter names are one route. */
export function routeKey(template: string): string {
  return template.replace(/\{[^}/]+\}/g, '{}');
}

export interface Operation {
  readonly method: string;
  readonly template: string;
  readonly item: Node;
  readonly operation: Node;
}

/** Every operation of the document by "METHOD route key". */
export function operationsOf(doc: Node): Map<string, Operation> {
  const found = new Map<string, Operation>();
  for (const [template, item] of Object.entries(node(doc['paths']))) {
    const resolved = deref(doc, item);
    for (const method of HTTP_METHODS) {
      const operation = resolved[method];
      if (!isNode(operation)) continue;
      const key = `${method.toUpperCase()} ${routeKey(template)}`;
      found.set(key, { method: method.toUpperCase(), template, item: resolved, operation });
    }
  }
  return found;
}
