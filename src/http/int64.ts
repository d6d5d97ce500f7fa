/** The smallest signed 64-bit integer. */
export const INT64_MIN: bigint = -(2n ** 63n);

/** The largest signed 64-bit integer. */
export const INT64_MAX: bigint = 2n ** 63n - 1n;

/** The most decimal digits an int64 can have. */
const MAX_DIGITS = 19;

const CANONICAL_INT64 = /^(?:0|-?[1-9][0-9]{0,18})$/;

/** What parseCanonicalInt64 accepts, worded to follow a field's name. */
export const CANONICAL_INT64_RULE = `must be a decimal integer between ${INT64_MIN} and ${INT64_MAX}, without a plus sign or leading zeros`;

const JSON_NUMBER = /^(-?)(0|[1-9][0-9]*)(?:\.([0-9]+))?(?:[eE]([+-]?[0-9]+))?$/;

/** A canonical decimal int64 (optional minus, no plus, no leading zeros, no "-0"), or undefined for anything else (including out of range, empty, whitespace, "1.0", "1e2", "+1", "01"). */
export function parseCanonicalInt64(text: string): bigint | undefined {
  if (!CANONICAL_INT64.test(text)) return undefined;
  const value = BigInt(text);
  return value >= INT64_MIN && value <= INT64_MAX ? value : undefined;
}

/** The outcome of reading a JSON number as an int64. */
export type JsonInt64 =
  | { readonly ok: true; readonly value: bigint }
  | { readonly ok: false; readonly reason: 'not-integer' | 'out-of-range' };

/** The exact integer value of a JSON number's source text (JSON Schema semantics: 1.0 and 1e2 and 0.5e1 are integers; 1.5 and 1.0000000000000000001 are not), checked against the int64 range exactly. */
export function int64FromJsonNumber(raw: string): JsonInt64 {
  const match = JSON_NUMBER.exec(raw);
  if (match === null) return { ok: false, reason: 'not-integer' };
  const [, sign = '', whole = '', fraction = '', exponent = '0'] = match;
  const digits = (whole + fraction).replace(/^0+/, '');
  if (digits === '') return { ok: true, value: 0n };
  // Value = significand × 10^scale, where the significand has no trailing zeros, so any
  // negative scale means a fractional part; sizes are judged by counting before any BigInt is built.
  const significand = digits.slice(0, lastNonZero(digits) + 1);
  const scale = exponentValue(exponent) - fraction.length + (digits.length - significand.length);
  if (scale < 0) return { ok: false, reason: 'not-integer' };
  if (significand.length + scale > MAX_DIGITS) return { ok: false, reason: 'out-of-range' };
  const magnitude = BigInt(significand) * 10n ** BigInt(scale);
  const value = sign === '-' ? -magnitude : magnitude;
  if (value < INT64_MIN || value > INT64_MAX) return { ok: false, reason: 'out-of-range' };
  return { ok: true, value };
}

// A loop, because /0+$/ backtracks quadratically on long digit strings with inner zeros.
function lastNonZero(digits: string): number {
  let i = digits.length - 1;
  while (digits.charCodeAt(i) === 0x30) i--;
  return i;
}

/** The exponent as a number, clamped far beyond any string length so the arithmetic above stays exact. */
function exponentValue(text: string): number {
  const negative = text.startsWith('-');
  const magnitude = text.replace(/^[+-]?0*/, '');
  const value = magnitude.length > 15 ? 1e15 : Number(magnitude);
  return negative ? -value : value;
}
