import { deref, isNode, node, operationsOf, type Node, type Operation } from './openapi-walk';
import { schemaBreaks } from './schema-compat';

type Docs = { readonly before: Node; readonly after: Node };

/** Parameters by `in:name`; path parameters by position, so renaming `{id}` changes nothing. */
function parametersOf(doc: Node, { item, operation, template }: Operation): Map<string, Node> {
  const pathNames = [...template.matchAll(/\{([^}/]+)\}/g)].map((match) => match[1]);
  const found = new Map<string, Node>();
  for (const raw of [item['parameters'], operation['parameters']].flat()) {
    if (raw === undefined) continue;
    const parameter = deref(doc, raw);
    const name = String(parameter['name']);
    const place = String(parameter['in']);
    const key = place === 'path' ? `path #${pathNames.indexOf(name)}` : `${place} ${name}`;
    found.set(key, parameter);
  }
  return found;
}

/** The effective security requirements, each as a canonical string; empty means public. */
function securityOf(doc: Node, operation: Node): Set<string> {
  const requirements = operation['security'] ?? doc['security'] ?? [];
  if (!Array.isArray(requirements)) return new Set();
  return new Set(
    requirements.map((r) =>
      JSON.stringify(Object.entries(node(r)).sort(([a], [b]) => (a < b ? -1 : 1))),
    ),
  );
}

function contentBreaks(
  docs: Docs,
  before: unknown,
  after: unknown,
  direction: 'request' | 'response',
  where: string,
): string[] {
  const found: string[] = [];
  const now = node(after);
  for (const [type, media] of Object.entries(node(before))) {
    const kept = now[type];
    if (!isNode(kept)) {
      found.push(`${where}: media type ${type} removed`);
      continue;
    }
    const schemas = [node(media)['schema'] ?? {}, kept['schema'] ?? {}] as const;
    found.push(...schemaBreaks(docs, schemas[0], schemas[1], direction, `${where} ${type}`));
  }
  return found;
}

function parameterBreaks(docs: Docs, old: Operation, now: Operation, where: string): string[] {
  const found: string[] = [];
  const before = parametersOf(docs.before, old);
  const after = parametersOf(docs.after, now);
  for (const [key, parameter] of before) {
    const kept = after.get(key);
    const label = `${where} parameter ${key.startsWith('path') ? parameter['name'] : key}`;
    if (kept === undefined) {
      found.push(`${label}: removed; callers that send it are refused`);
      continue;
    }
    if (kept['required'] === true && parameter['required'] !== true) {
      found.push(`${label}: now required`);
    }
    found.push(...schemaBreaks(docs, parameter['schema'], kept['schema'], 'request', label));
  }
  for (const [key, parameter] of after) {
    if (!before.has(key) && parameter['required'] === true) {
      found.push(`${where} parameter ${key}: new required parameter`);
    }
  }
  return found;
}

function bodyBreaks(docs: Docs, old: Node, now: Node, where: string): string[] {
  const before = deref(docs.before, old['requestBody']);
  const after = deref(docs.after, now['requestBody']);
  const found: string[] = [];
  const label = `${where} request body`;
  if (after['required'] === true && before['required'] !== true)
    found.push(`${label}: now required`);
  found.push(...contentBreaks(docs, before['content'], after['content'], 'request', label));
  return found;
}

function responseBreaks(docs: Docs, old: Node, now: Node, where: string): string[] {
  const found: string[] = [];
  const after = node(now['responses']);
  for (const [status, raw] of Object.entries(node(old['responses']))) {
    const label = `${where} response ${status}`;
    if (after[status] === undefined) {
      found.push(`${label}: removed`);
      continue;
    }
    const before = deref(docs.before, raw);
    const kept = deref(docs.after, after[status]);
    found.push(...contentBreaks(docs, before['content'], kept['content'], 'response', label));
    found.push(...headerBreaks(docs, before['headers'], kept['headers'], label));
  }
  return found;
}

function headerBreaks(docs: Docs, before: unknown, after: unknown, where: string): string[] {
  const found: string[] = [];
  const now = node(after);
  for (const [name, header] of Object.entries(node(before))) {
    const label = `${where} header ${name}`;
    if (now[name] === undefined) {
      found.push(`${label}: removed`);
      continue;
    }
    const [was, is] = [deref(docs.before, header), deref(docs.after, now[name])];
    if (was['required'] === true && is['required'] !== true) {
      found.push(`${label}: no longer required`);
    }
    found.push(...schemaBreaks(docs, was['schema'], is['schema'], 'response', label));
  }
  return found;
}

/** A caller met one of the old alternatives, or none when the operation was public. */
function securityBreaks(docs: Docs, old: Node, now: Node, where: string): string[] {
  const [before, after] = [securityOf(docs.before, old), securityOf(docs.after, now)];
  const isPublic = after.size === 0 || after.has('[]');
  const wasPublic = before.size === 0 || before.has('[]');
  if (isPublic) return [];
  if (wasPublic) return [`${where}: now requires authentication`];
  return [...before].some((r) => !after.has(r)) ? [`${where}: security requirements changed`] : [];
}

function schemeBreaks(docs: Docs): string[] {
  const before = node(node(docs.before['components'])['securitySchemes']);
  const after = node(node(docs.after['components'])['securitySchemes']);
  const shape = (s: Node) =>
    JSON.stringify(['type', 'scheme', 'in', 'name', 'flows'].map((k) => s[k]));
  return Object.entries(before).flatMap(([name, scheme]) => {
    if (after[name] === undefined) return [`security scheme ${name}: removed`];
    const changed = shape(deref(docs.before, scheme)) !== shape(deref(docs.after, after[name]));
    return changed ? [`security scheme ${name}: type, scheme or location changed`] : [];
  });
}

/**
 * Every change from `before` to `after` that can break an existing caller: a removed operation,
 * response, media type, parameter or response field; a new required request field or parameter;
 * a narrowed request schema or widened response schema; new or changed security; a renamed
 * operationId (generated clients name their methods after it). One sentence per finding.
 */
export function findBreakingChanges(before: Node, after: Node): string[] {
  const docs: Docs = { before, after };
  const found: string[] = [];
  const now = operationsOf(after);
  for (const [key, old] of operationsOf(before)) {
    const kept = now.get(key);
    const where = `${old.method} ${old.template}`;
    if (kept === undefined) {
      found.push(`${where}: operation removed`);
      continue;
    }
    const [was, is] = [old.operation['operationId'], kept.operation['operationId']];
    if (was !== is) found.push(`${where}: operationId ${String(was)} → ${String(is)}`);
    found.push(...securityBreaks(docs, old.operation, kept.operation, where));
    found.push(...parameterBreaks(docs, old, kept, where));
    found.push(...bodyBreaks(docs, old.operation, kept.operation, where));
    found.push(...responseBreaks(docs, old.operation, kept.operation, where));
  }
  return [...found, ...schemeBreaks(docs)];
}
