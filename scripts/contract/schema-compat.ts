import type { Node } from './openapi-walk';
import { same, viewOf, type View } from './schema-view';

/**
 * Which way a schema may change: a request schema must still accept everything it accepted
 * (narrowing breaks callers), a response schema must still promise everything it promised
 * (widening breaks callers).
 */
export type Direction = 'request' | 'response';

/** Whether every value of `type` is also a value of one of `types` (an integer is a number). */
function covered(type: string, types: ReadonlySet<string> | undefined): boolean {
  return types === undefined || types.has(type) || (type === 'integer' && types.has('number'));
}

function list(set: ReadonlySet<string> | undefined): string {
  return set === undefined ? 'any type' : [...set].join(' | ');
}

/**
 * Describes every way `after` breaks the callers of `before` in the given direction, one sentence
 * each, prefixed with `where`. Unknown shapes (oneOf, anyOf, not...) that changed at all count as
 * breaking: the checker cannot prove them compatible.
 */
export function schemaBreaks(
  docs: { before: Node; after: Node },
  before: unknown,
  after: unknown,
  direction: Direction,
  where: string,
  depth = 0,
): string[] {
  if (depth > 16) return [];
  const old = viewOf(docs.before, before);
  const now = viewOf(docs.after, after);
  // In a request the caller sends `old`-shaped values that `now` must accept; in a response the
  // server sends `now`-shaped values that `old` (the caller's expectation) must accept.
  const [sent, accepted] = direction === 'request' ? [old, now] : [now, old];
  const narrowed = direction === 'request' ? 'now refuses' : 'may now answer';
  const found: string[] = [];
  const say = (text: string) => found.push(`${where}: ${text}`);

  const typeBreaks =
    sent.types === undefined
      ? accepted.types !== undefined
      : [...sent.types].some((type) => !covered(type, accepted.types));
  if (typeBreaks) say(`type changed from ${list(old.types)} to ${list(now.types)}`);
  if (accepted.values !== undefined) {
    const allowed = accepted.values;
    const extra =
      sent.values === undefined
        ? ['values outside the list']
        : sent.values.filter((v) => !allowed.some((a) => same(a, v))).map((v) => JSON.stringify(v));
    if (extra.length > 0) say(`${narrowed} ${extra.join(', ')}`);
  }
  const bound = (key: string, limits: (v: View) => ReadonlyMap<string, number>) =>
    say(`${key} ${limits(old).get(key) ?? 'none'} → ${limits(now).get(key) ?? 'none'}`);
  for (const [key, limit] of accepted.lower) {
    const was = sent.lower.get(key);
    if (was === undefined || was < limit) bound(key, (v) => v.lower);
  }
  for (const [key, limit] of accepted.upper) {
    const was = sent.upper.get(key);
    if (was === undefined || was > limit) bound(key, (v) => v.upper);
  }
  const step = accepted.multipleOf;
  if (step !== undefined && (sent.multipleOf === undefined || sent.multipleOf % step !== 0)) {
    say(`multipleOf ${old.multipleOf ?? 'none'} → ${now.multipleOf ?? 'none'}`);
  }
  for (const text of accepted.texts) {
    if (!sent.texts.has(text)) say(`${direction === 'request' ? 'added' : 'removed'} ${text}`);
  }
  if (old.composite !== now.composite) say('oneOf/anyOf/not/if changed; not provably compatible');

  for (const [name, schema] of old.properties) {
    const field = `${where}.${name}`;
    const kept = now.properties.get(name);
    if (kept === undefined) {
      if (direction === 'response') found.push(`${field}: response field removed`);
      else if (now.closed) found.push(`${field}: request field removed; sending it is now refused`);
      continue;
    }
    found.push(...schemaBreaks(docs, schema, kept, direction, field, depth + 1));
  }
  if (direction === 'request') {
    for (const name of now.required) {
      if (!old.required.has(name)) found.push(`${where}.${name}: new required request field`);
    }
    if (now.closed && !old.closed) say('unknown properties are now refused');
  } else {
    for (const name of old.required) {
      if (!now.required.has(name) && now.properties.has(name)) {
        found.push(`${where}.${name}: response field no longer required`);
      }
    }
  }
  if (old.items !== undefined || now.items !== undefined) {
    found.push(
      ...schemaBreaks(docs, old.items ?? {}, now.items ?? {}, direction, `${where}[]`, depth + 1),
    );
  }
  return found;
}
