import { types } from 'node:util';

/**
 * What an error says, on one line: its message; or, when that is empty, its inner errors' messages
 * (Node's AggregateError for a connection tried at each of a host's addresses, which the pg driver
 * passes on as it is: a host of two addresses with PostgreSQL down gave an empty message), else
 * its code, else its name; followed, in parentheses, by what its cause says, if it has one (the
 * store's "The store is unavailable." says why only there: a sync that did not return in time, a
 * lock held too long). Errors of any realm count (types.isNativeError, not instanceof).
 */
export function errorText(error: unknown, seen = new Set<unknown>()): string {
  if (!types.isNativeError(error)) return String(error);
  seen.add(error);
  const text = ownText(error);
  const cause = error.cause;
  // A cause said already (a message that quotes it), or one met before (a cycle), is not repeated.
  if (!types.isNativeError(cause) || seen.has(cause)) return text;
  const causeText = errorText(cause, seen);
  return text.includes(causeText) ? text : `${text} (${causeText})`;
}

function ownText(error: Error): string {
  if (error.message !== '') return error.message;
  const errors: unknown = (error as { errors?: unknown }).errors;
  const inner = Array.isArray(errors) ? [...new Set(errors.map((each) => errorText(each)))] : [];
  if (inner.length > 0) return inner.join('; ');
  return (error as NodeJS.ErrnoException).code ?? error.name;
}
