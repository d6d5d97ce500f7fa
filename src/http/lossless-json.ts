/** A JSON text that breaks RFC 8259 or this parser's limits; position is the index in the source string. */
export class JsonSyntaxError extends Error {
  readonly position: number;

  constructor(message: string, position: number) {
    super(message);
    this.name = 'JsonSyntaxError';
    this.position = position;
  }
}

/** A parsed JSON document that still knows how each of its numbers was written. */
export interface ParsedJson {
  /** The parsed value; numbers are JS numbers (see toDouble). */
  readonly value: unknown;
  /** The exact source text of the number stored at holder[key] (holder is an object or array from `value`), or undefined when that slot is not a number. */
  numberSource(holder: object, key: string | number): string | undefined;
}

/**
 * A JSON number's nearest double, as Number() reads it, but finite: beyond the double's range the
 * largest double of its sign. `1e400` is an integer too (JSON Schema), so a validator must see an
 * integer there, not Infinity, and the exact source text then says how far out of range it is.
 */
function toDouble(raw: string): number {
  const value = Number(raw);
  if (Number.isFinite(value)) return value;
  return value > 0 ? Number.MAX_VALUE : -Number.MAX_VALUE;
}

/** Parses one strict RFC 8259 JSON text, rejecting duplicate keys, unpaired surrogates and nesting deeper than maxDepth (default 64). */
export function parseJson(text: string, options: { maxDepth?: number } = {}): ParsedJson {
  const maxDepth = options.maxDepth ?? 64;
  if (!Number.isSafeInteger(maxDepth) || maxDepth < 0) {
    throw new RangeError(`maxDepth must be a non-negative integer, got ${maxDepth}`);
  }
  const parser = new Parser(text, maxDepth);
  const value = parser.parseDocument();
  const sources = parser.sources;
  return {
    value,
    numberSource(holder, key) {
      const raw = sources.get(holder)?.get(String(key));
      // The holder may have changed since parsing; only vouch for a slot still holding that number.
      return raw !== undefined && Object.is(Reflect.get(holder, key), toDouble(raw))
        ? raw
        : undefined;
    },
  };
}

type Sources = WeakMap<object, Map<string, string>>;

type Frame =
  | { readonly kind: 'array'; readonly container: unknown[] }
  | { readonly kind: 'object'; readonly container: Record<string, unknown>; key: string };

/** The characters allowed after a backslash, and at the same index the code unit each stands for. */
const ESCAPE_NAMES = '"\\/bfnrt';
const ESCAPE_UNITS = '"\\/\b\f\n\r\t';

/** Marks that a non-empty container was opened, so the next thing to read is its first member. */
const OPENED: unique symbol = Symbol('opened');

/** Adds key as an own enumerable data property and returns it. */
function setOwn(object: Record<string, unknown>, key: string, value: unknown): string {
  // Assignment is several times faster than defineProperty, but for "__proto__" it would set the
  // prototype, and for other inherited names it fails when Object.prototype is frozen.
  if (Object.hasOwn(Object.prototype, key)) {
    const property = { value, enumerable: true, writable: true, configurable: true };
    Object.defineProperty(object, key, property);
  } else {
    object[key] = value;
  }
  return key;
}

function isDigit(c: number): boolean {
  return c >= 0x30 && c <= 0x39;
}

function isHexDigit(c: number): boolean {
  const lower = c | 0x20;
  return isDigit(c) || (lower >= 0x61 && lower <= 0x66);
}

function describeChar(text: string, at: number): string {
  return JSON.stringify(String.fromCodePoint(text.codePointAt(at) ?? 0));
}

function quoteKey(key: string): string {
  return JSON.stringify(key.length > 64 ? `${key.slice(0, 64)}…` : key);
}

/** Iterative, so hostile nesting can never overflow the call stack. */
class Parser {
  readonly sources: Sources = new WeakMap();
  private pos = 0;
  /** The source text of the scalar just read when it was a number. */
  private raw: string | undefined;

  constructor(
    private readonly text: string,
    private readonly maxDepth: number,
  ) {}

  parseDocument(): unknown {
    const value = this.parseValue();
    this.skipWhitespace();
    if (this.pos < this.text.length) this.failUnexpected();
    return value;
  }

  private parseValue(): unknown {
    const stack: Frame[] = [];
    for (;;) {
      let value = this.openOrScalar(stack);
      if (value === OPENED) continue;
      for (;;) {
        const frame = stack[stack.length - 1];
        if (frame === undefined) return value;
        this.store(frame, value);
        if (!this.closesAfterMember(frame)) break;
        stack.pop();
        value = frame.container;
        this.raw = undefined;
      }
    }
  }

  private openOrScalar(stack: Frame[]): unknown {
    this.skipWhitespace();
    this.raw = undefined;
    const c = this.text.charCodeAt(this.pos);
    if (c === 0x22) return this.parseString();
    if (c === 0x2d || isDigit(c)) return this.parseNumber();
    if (c === 0x7b) return this.open(stack, { kind: 'object', container: {}, key: '' }, 0x7d);
    if (c === 0x5b) return this.open(stack, { kind: 'array', container: [] }, 0x5d);
    if (c === 0x74) return this.literal('true', true);
    if (c === 0x66) return this.literal('false', false);
    if (c === 0x6e) return this.literal('null', null);
    return this.failUnexpected();
  }

  private open(stack: Frame[], frame: Frame, close: number): unknown {
    if (stack.length >= this.maxDepth) {
      this.fail(`JSON nesting is deeper than ${this.maxDepth} levels`);
    }
    this.pos++;
    this.skipWhitespace();
    if (this.text.charCodeAt(this.pos) === close) {
      this.pos++;
      return frame.container;
    }
    stack.push(frame);
    if (frame.kind === 'object') this.readKey(frame);
    return OPENED;
  }

  private readKey(frame: Frame & { kind: 'object' }): void {
    this.skipWhitespace();
    const at = this.pos;
    if (this.text.charCodeAt(at) !== 0x22) this.failUnexpected();
    const key = this.parseString();
    if (Object.hasOwn(frame.container, key)) {
      this.fail(`Duplicate key ${quoteKey(key)} in a JSON object`, at);
    }
    this.skipWhitespace();
    if (this.text.charCodeAt(this.pos) !== 0x3a) this.failUnexpected();
    this.pos++;
    frame.key = key;
  }

  private store(frame: Frame, value: unknown): void {
    const slot =
      frame.kind === 'array'
        ? frame.container.push(value) - 1
        : setOwn(frame.container, frame.key, value);
    if (this.raw === undefined) return;
    let slots = this.sources.get(frame.container);
    if (slots === undefined) this.sources.set(frame.container, (slots = new Map()));
    slots.set(String(slot), this.raw);
  }

  /** Reads the "," or closing bracket after a member; true when the container ended. */
  private closesAfterMember(frame: Frame): boolean {
    this.skipWhitespace();
    const c = this.text.charCodeAt(this.pos);
    if (c === 0x2c) {
      this.pos++;
      if (frame.kind === 'object') this.readKey(frame);
      return false;
    }
    if (c !== (frame.kind === 'array' ? 0x5d : 0x7d)) this.failUnexpected();
    this.pos++;
    return true;
  }

  private literal<T>(word: string, value: T): T {
    for (let k = 0; k < word.length; k++, this.pos++) {
      if (this.text.charCodeAt(this.pos) !== word.charCodeAt(k)) this.failUnexpected();
    }
    return value;
  }

  private parseNumber(): number {
    const text = this.text;
    const start = this.pos;
    let i = text.charCodeAt(start) === 0x2d ? start + 1 : start;
    if (text.charCodeAt(i) === 0x30) {
      if (isDigit(text.charCodeAt(++i))) this.fail('Leading zero in a number', start);
    } else {
      i = this.digits(i);
    }
    if (text.charCodeAt(i) === 0x2e) i = this.digits(i + 1);
    const e = text.charCodeAt(i);
    if (e === 0x65 || e === 0x45) {
      const sign = text.charCodeAt(i + 1);
      i = this.digits(sign === 0x2b || sign === 0x2d ? i + 2 : i + 1);
    }
    this.pos = i;
    this.raw = text.slice(start, i);
    return toDouble(this.raw);
  }

  /** Skips one or more digits starting at i and returns the index after them. */
  private digits(i: number): number {
    let j = i;
    while (isDigit(this.text.charCodeAt(j))) j++;
    if (j === i) this.failUnexpected(i);
    return j;
  }

  private parseString(): string {
    const text = this.text;
    let i = this.pos + 1;
    let chunk = i;
    let out = '';
    let high = -1; // position of a high surrogate still waiting for its low half
    for (;;) {
      const c = text.charCodeAt(i);
      if (c === 0x22) break;
      if (c === 0x5c) {
        const unit = this.escape(i);
        if (high >= 0 || (unit & 0xf800) === 0xd800) high = this.surrogate(unit, i, high);
        out += text.slice(chunk, i) + String.fromCharCode(unit);
        i += text.charCodeAt(i + 1) === 0x75 ? 6 : 2;
        chunk = i;
        continue;
      }
      if (!(c >= 0x20)) {
        if (i >= text.length) this.failUnexpected(i);
        this.fail(`Unescaped control character ${describeChar(text, i)} in a string`, i);
      }
      if (high >= 0 || (c & 0xf800) === 0xd800) high = this.surrogate(c, i, high);
      i++;
    }
    if (high >= 0) this.failUnpaired(high);
    this.pos = i + 1;
    return out + text.slice(chunk, i);
  }

  /** Tracks surrogate pairing over decoded code units; returns the position of a pending high half, or -1. */
  private surrogate(unit: number, at: number, high: number): number {
    const isLow = unit >= 0xdc00 && unit <= 0xdfff;
    if (high >= 0) {
      if (isLow) return -1;
      this.failUnpaired(high);
    }
    if (isLow) this.failUnpaired(at);
    return unit >= 0xd800 && unit <= 0xdbff ? at : -1;
  }

  private failUnpaired(at: number): never {
    this.fail('Unpaired surrogate in a string (it cannot be stored as UTF-8)', at);
  }

  /** Decodes the escape sequence whose backslash is at position at into one UTF-16 code unit. */
  private escape(at: number): number {
    const e = this.text.charAt(at + 1);
    if (e === 'u') return this.hex4(at + 2);
    if (e === '') this.failUnexpected(at + 1);
    const index = ESCAPE_NAMES.indexOf(e);
    if (index >= 0) return ESCAPE_UNITS.charCodeAt(index);
    this.fail(`Invalid escape "\\${e}"`, at);
  }

  private hex4(i: number): number {
    for (let k = i; k < i + 4; k++) {
      if (!isHexDigit(this.text.charCodeAt(k))) this.failUnexpected(k);
    }
    return parseInt(this.text.slice(i, i + 4), 16);
  }

  private skipWhitespace(): void {
    const text = this.text;
    let i = this.pos;
    for (let c = text.charCodeAt(i); c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;) {
      c = text.charCodeAt(++i);
    }
    this.pos = i;
  }

  private failUnexpected(at = this.pos): never {
    if (at >= this.text.length) throw new JsonSyntaxError('Unexpected end of JSON input', at);
    this.fail(`Unexpected character ${describeChar(this.text, at)}`, at);
  }

  private fail(what: string, at = this.pos): never {
    throw new JsonSyntaxError(`${what} at position ${at}`, at);
  }
}
