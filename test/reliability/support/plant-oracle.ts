/**
 * An oracle for the plant operations, written from the contract and README rather than from the
 * service's code: which create bodies are a valid NewPlant (and with which exact id), which path
 * ids are canonical, which media types and encodings are accepted.
 */

export const INT64_MIN = -(2n ** 63n);
export const INT64_MAX = 2n ** 63n - 1n;

/** A create body judged by the contract. `lenient`: valid after a UTF-8 byte order mark, which RFC 8259 lets a parser ignore or refuse. */
export type PlantVerdict =
  | {
      readonly valid: true;
      readonly lenient: boolean;
      readonly id: bigint;
      readonly name: string;
      readonly tag?: string;
    }
  | { readonly valid: false; readonly why: string };

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** The exact integer a JSON number denotes, or undefined when it is not an integer; no huge BigInts. */
export function exactInteger(text: string): bigint | undefined {
  const match = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(text);
  if (match === null) return undefined;
  const [, sign = '', whole = '', fraction = '', exponentText = '0'] = match;
  let digits = (whole + fraction).replace(/^0+/, '');
  if (digits === '') return 0n;
  // Exponents past 10^6 decide the verdict alone: far too large, or far too small to be integral.
  const exponent = exponentText.replace(/^[+-]?0*/, '').length > 7 ? NaN : Number(exponentText);
  let scale = Number.isNaN(exponent)
    ? exponentText.startsWith('-')
      ? -Infinity
      : Infinity
    : exponent - fraction.length;
  let end = digits.length;
  while (digits.charCodeAt(end - 1) === 0x30) end--;
  scale += digits.length - end;
  digits = digits.slice(0, end);
  if (scale < 0) return undefined;
  // Beyond 40 digits it is out of any int64 range; the exact value does not matter.
  if (digits.length + scale > 40) return sign === '-' ? INT64_MIN - 1n : INT64_MAX + 1n;
  const magnitude = BigInt(digits) * 10n ** BigInt(scale);
  return sign === '-' ? -magnitude : magnitude;
}

function codePoints(text: string): number {
  return [...text].length;
}

function wellFormed(text: string): boolean {
  return !/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(text);
}

function validField(text: string): boolean {
  const length = codePoints(text);
  return length >= 1 && length <= 255 && !text.includes('\u0000') && wellFormed(text);
}

const WHITESPACE = /^[ \t\n\r]*/;
// eslint-disable-next-line no-control-regex -- JSON strings may not hold raw control characters.
const STRING = /^"(?:[^"\\\u0000-\u001f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"/;
const NUMBER = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/;

type Scalar = { kind: 'string'; value: string } | { kind: 'number'; text: string };

/**
 * Reads the body as a flat JSON object whose values are strings or numbers (the only shape a
 * NewPlant can have); anything else is invalid for createPlant.
 */
function flatObject(text: string): Map<string, Scalar> | string {
  let rest = text;
  const skip = () => {
    rest = rest.slice((WHITESPACE.exec(rest) as RegExpExecArray)[0].length);
  };
  const take = (token: string) => {
    skip();
    if (!rest.startsWith(token)) return false;
    rest = rest.slice(token.length);
    return true;
  };
  if (!take('{')) return 'not an object';
  const members = new Map<string, Scalar>();
  if (take('}')) return /^[ \t\n\r]*$/.test(rest) ? members : 'trailing text';
  for (;;) {
    skip();
    const key = STRING.exec(rest);
    if (key === null) return 'a key is not a string';
    rest = rest.slice(key[0].length);
    const name = JSON.parse(key[0]) as string;
    if (members.has(name)) return `duplicate key ${JSON.stringify(name)}`;
    if (!take(':')) return 'no colon';
    skip();
    const string = STRING.exec(rest);
    const number = string === null ? NUMBER.exec(rest) : null;
    if (string !== null) {
      members.set(name, { kind: 'string', value: JSON.parse(string[0]) as string });
      rest = rest.slice(string[0].length);
    } else if (number !== null) {
      members.set(name, { kind: 'number', text: number[0] });
      rest = rest.slice(number[0].length);
    } else {
      return `the value of ${JSON.stringify(name)} is not a string or number`;
    }
    if (take(',')) continue;
    if (take('}')) break;
    return 'no comma or closing brace';
  }
  return /^[ \t\n\r]*$/.test(rest) ? members : 'trailing text';
}

/** Judges a createPlant body by the contract's NewPlant and README's strict-JSON rules. */
export function judgeNewPlant(body: Buffer): PlantVerdict {
  let text: string;
  try {
    text = utf8.decode(body);
  } catch {
    return { valid: false, why: 'not UTF-8' };
  }
  const lenient = text.startsWith('\ufeff');
  if (lenient) text = text.slice(1);
  const members = flatObject(text);
  if (typeof members === 'string') return { valid: false, why: members };
  for (const key of members.keys()) {
    if (!['id', 'name', 'tag'].includes(key)) return { valid: false, why: `unknown key ${key}` };
  }
  const id = members.get('id');
  const name = members.get('name');
  const tag = members.get('tag');
  if (id?.kind !== 'number') return { valid: false, why: 'id is missing or not a number' };
  const exact = exactInteger(id.text);
  if (exact === undefined || exact < INT64_MIN || exact > INT64_MAX) {
    return { valid: false, why: `id ${id.text} is not an int64` };
  }
  if (name?.kind !== 'string' || !validField(name.value)) return { valid: false, why: 'name' };
  if (tag !== undefined && (tag.kind !== 'string' || !validField(tag.value))) {
    return { valid: false, why: 'tag' };
  }
  return {
    valid: true,
    lenient,
    id: exact,
    name: name.value,
    ...(tag?.kind === 'string' ? { tag: tag.value } : {}),
  };
}

/** The id a DELETE path segment names (after percent-decoding, as URLs allow), if canonical. */
export function canonicalPathId(segment: string): bigint | undefined {
  let decoded: string;
  try {
    decoded = decodeURIComponent(segment);
  } catch {
    return undefined;
  }
  if (!/^(?:0|-?[1-9][0-9]{0,18})$/.test(decoded)) return undefined;
  const id = BigInt(decoded);
  return id >= INT64_MIN && id <= INT64_MAX ? id : undefined;
}

/** `application/json`, any case, with no charset or `charset=utf-8` (quoted or not). */
export function acceptedMediaType(header: string): boolean {
  const [type = '', ...parameters] = header.split(';');
  if (type.trim().toLowerCase() !== 'application/json') return false;
  return parameters.every((parameter) => {
    const at = parameter.indexOf('=');
    const name = (at === -1 ? parameter : parameter.slice(0, at)).trim().toLowerCase();
    const value = (at === -1 ? '' : parameter.slice(at + 1)).trim().toLowerCase();
    return name !== 'charset' || value.replace(/^"(.*)"$/, '$1') === 'utf-8';
  });
}

/** No Content-Encoding, or `identity`. */
export function acceptedEncoding(header: string | undefined): boolean {
  return header === undefined || header.trim().toLowerCase() === 'identity';
}
