import { JsonSyntaxError, parseJson } from '../../src/http/lossless-json';

function syntaxError(text: string, options?: { maxDepth?: number }): JsonSyntaxError {
  try {
    parseJson(text, options);
  } catch (error) {
    if (error instanceof JsonSyntaxError) return error;
    throw error;
  }
  throw new Error(`expected ${JSON.stringify(text)} to be rejected`);
}

function nested(depth: number): string {
  return '['.repeat(depth) + ']'.repeat(depth);
}

describe('parseJson', () => {
  describe('grammar', () => {
    it.each([
      ['null', null],
      ['true', true],
      ['false', false],
      ['0', 0],
      ['-0', -0],
      ['123', 123],
      ['-7', -7],
      ['1.5', 1.5],
      ['-0.25', -0.25],
      ['1e3', 1000],
      ['1E3', 1000],
      ['1e+3', 1000],
      ['1e-3', 0.001],
      ['2.5E-1', 0.25],
      ['""', ''],
      ['"abc"', 'abc'],
      ['[]', []],
      ['{}', {}],
      [' \t\n\r[ 1 , 2 ] \r\n\t ', [1, 2]],
    ])('accepts %j', (text, expected) => {
      expect(parseJson(text).value).toEqual(expected);
    });

    it('reads a number beyond the double range as the largest double of its sign, keeping its source', () => {
      const parsed = parseJson('[1e400, -1e400, 1e-400]');
      const numbers = parsed.value as number[];

      expect(numbers).toStrictEqual([Number.MAX_VALUE, -Number.MAX_VALUE, 0]);
      expect([0, 1, 2].map((i) => parsed.numberSource(numbers, i))).toStrictEqual([
        '1e400',
        '-1e400',
        '1e-400',
      ]);
    });

    it('keeps the sign of negative zero', () => {
      expect(Object.is(parseJson('-0').value, -0)).toBe(true);
    });

    it('decodes every escape sequence', () => {
      const text = String.raw`"\" \\ \/ \b \f \n \r \t \u0041 \u00e9 \uFFFF \u0000"`;
      expect(parseJson(text).value).toBe('" \\ / \b \f \n \r \t A é \uffff \u0000');
    });

    it('takes non-ASCII text without escapes as written', () => {
      expect(parseJson('"héllo ✓ 😀"').value).toBe('héllo ✓ 😀');
    });

    it.each([
      ['', 'Unexpected end of JSON input'],
      ['   ', 'Unexpected end of JSON input'],
      ['tru', 'Unexpected end of JSON input'],
      ['nul', 'Unexpected end of JSON input'],
      ['True', 'Unexpected character "T" at position 0'],
      ['nulL', 'Unexpected character "L" at position 3'],
      ['undefined', 'Unexpected character "u" at position 0'],
      ['NaN', 'Unexpected character "N" at position 0'],
      ['Infinity', 'Unexpected character "I" at position 0'],
      ['-Infinity', 'Unexpected character "I" at position 1'],
      ['+1', 'Unexpected character "+" at position 0'],
      ['01', 'Leading zero in a number at position 0'],
      ['-01', 'Leading zero in a number at position 0'],
      ['-', 'Unexpected end of JSON input'],
      ['-a', 'Unexpected character "a" at position 1'],
      ['.5', 'Unexpected character "." at position 0'],
      ['1.', 'Unexpected end of JSON input'],
      ['1.e3', 'Unexpected character "e" at position 2'],
      ['1e', 'Unexpected end of JSON input'],
      ['1e+', 'Unexpected end of JSON input'],
      ['1e+x', 'Unexpected character "x" at position 3'],
      ['0x10', 'Unexpected character "x" at position 1'],
      ['1 2', 'Unexpected character "2" at position 2'],
      ['{} x', 'Unexpected character "x" at position 3'],
      ['[1,]', 'Unexpected character "]" at position 3'],
      ['[,1]', 'Unexpected character "," at position 1'],
      ['[1 2]', 'Unexpected character "2" at position 3'],
      ['[1', 'Unexpected end of JSON input'],
      ['{"a":1,}', 'Unexpected character "}" at position 7'],
      ['{"a" 1}', 'Unexpected character "1" at position 5'],
      ['{"a":}', 'Unexpected character "}" at position 5'],
      ['{a:1}', 'Unexpected character "a" at position 1'],
      ["{'a':1}", `Unexpected character "'" at position 1`],
      ['{"a":1', 'Unexpected end of JSON input'],
      ['{"a":1]', 'Unexpected character "]" at position 6'],
      ['[1}', 'Unexpected character "}" at position 2'],
      ["'a'", `Unexpected character "'" at position 0`],
      ['"abc', 'Unexpected end of JSON input'],
      ['"\\', 'Unexpected end of JSON input'],
      ['"\\x"', 'Invalid escape "\\x" at position 1'],
      ['"\\U0041"', 'Invalid escape "\\U" at position 1'],
      ['"\\u00G0"', 'Unexpected character "G" at position 5'],
      ['"\\u12"', 'Unexpected character "\\"" at position 5'],
      ['"a\nb"', 'Unescaped control character "\\n" in a string at position 2'],
      ['"\u0000"', 'Unescaped control character "\\u0000" in a string at position 1'],
      ['"\u001f"', 'Unescaped control character "\\u001f" in a string at position 1'],
      ['\u00a0 1', 'Unexpected character "\u00a0" at position 0'],
      ['\ufeff1', 'Unexpected character "\ufeff" at position 0'],
      ['\v1', 'Unexpected character "\\u000b" at position 0'],
      ['\f1', 'Unexpected character "\\f" at position 0'],
    ])('rejects %j with a message saying what and where', (text, message) => {
      expect(syntaxError(text).message).toBe(message);
    });

    it('accepts DEL and other non-control characters raw inside strings', () => {
      expect(parseJson('"\u007f\u0080\u2028"').value).toBe('\u007f\u0080\u2028');
    });

    it('reports the index in the string as the error position', () => {
      const error = syntaxError('{"a": [1, 2, x]}');
      expect(error).toBeInstanceOf(Error);
      expect(error.name).toBe('JsonSyntaxError');
      expect(error.position).toBe(13);
      expect(error.message).toBe('Unexpected character "x" at position 13');
    });

    it('reports the length of the input as the position of an unexpected end', () => {
      expect(syntaxError('[1, 2').position).toBe(5);
    });
  });

  describe('round trips', () => {
    it.each([
      '{"a":1,"b":[true,false,null],"c":{"d":"e"}}',
      '[{"id":1,"tags":["x","y"]},{"id":2,"tags":[]}]',
      '{"nested":{"deeper":{"deepest":[[[1]]]}}}',
      '"\\u00e9\\ud83d\\ude00 \\"quoted\\" \\\\ back"',
      '[1.5e300,-2.5e-300,0.1,123456789012345678901234567890]',
      '{"":"empty key","a b":"space","\\u0000":"nul key"}',
      '  {  "x" : [ 1 , { "y" : null } ] }  ',
      '{"constructor":1,"toString":"s","hasOwnProperty":false,"0":"zero"}',
    ])('parses %s exactly as JSON.parse does', (text) => {
      expect(parseJson(text).value).toStrictEqual(JSON.parse(text));
    });

    it('builds ordinary objects and arrays', () => {
      const value = parseJson('{"list":[{}]}').value as { list: object[] };
      expect(Object.getPrototypeOf(value)).toBe(Object.prototype);
      expect(Array.isArray(value.list)).toBe(true);
      expect(Object.getPrototypeOf(value.list[0])).toBe(Object.prototype);
    });
  });

  describe('duplicate keys', () => {
    it('rejects duplicate keys with a message naming the key', () => {
      const error = syntaxError('{"name": "a", "name": "b"}');
      expect(error.message).toBe('Duplicate key "name" in a JSON object at position 14');
      expect(error.position).toBe(14);
    });

    it('rejects duplicate keys in nested objects', () => {
      expect(syntaxError('{"a": [{"b": 1, "c": 2, "b": 3}]}').message).toMatch(
        /^Duplicate key "b" in a JSON object/,
      );
    });

    it('rejects keys that are equal once their escapes are decoded', () => {
      expect(syntaxError('{"a": 1, "\\u0061": 2}').message).toMatch(/^Duplicate key "a"/);
    });

    it('accepts the same key in sibling objects', () => {
      expect(parseJson('[{"a": 1}, {"a": 2}]').value).toEqual([{ a: 1 }, { a: 2 }]);
    });

    it('rejects a duplicated "__proto__" key', () => {
      expect(syntaxError('{"__proto__": 1, "__proto__": 2}').message).toMatch(
        /^Duplicate key "__proto__"/,
      );
    });
  });

  describe('__proto__ keys', () => {
    it('stores "__proto__" as an own data property without changing the prototype', () => {
      const value = parseJson('{"__proto__": {"polluted": true}, "a": 1}').value as object;
      expect(Object.getPrototypeOf(value)).toBe(Object.prototype);
      expect(Object.keys(value)).toEqual(['__proto__', 'a']);
      expect(Object.getOwnPropertyDescriptor(value, '__proto__')).toEqual({
        value: { polluted: true },
        enumerable: true,
        writable: true,
        configurable: true,
      });
      expect(({} as Record<string, unknown>)['polluted']).toBeUndefined();
      expect(value).toStrictEqual(JSON.parse('{"__proto__": {"polluted": true}, "a": 1}'));
    });
  });

  describe('surrogates', () => {
    it.each([
      ['an escaped lone high surrogate', '"\\ud800"', 1],
      ['an escaped lone low surrogate', '"\\udc00"', 1],
      ['an escaped high surrogate followed by a letter', '"\\ud83dx"', 1],
      ['two escaped high surrogates', '"\\ud83d\\ud83d\\ude00"', 1],
      ['escaped low then high surrogates', '"\\ude00\\ud83d"', 1],
      ['a raw lone high surrogate', '"a\ud800"', 2],
      ['a raw lone low surrogate', '"a\udc00b"', 2],
      ['a raw high surrogate before an escape', '"\ud83d\\n"', 1],
      ['a lone surrogate in a key', '{"\\ud800": 1}', 2],
    ])('rejects %s as an unpaired surrogate', (_, text, position) => {
      const error = syntaxError(text);
      expect(error.message).toMatch(/unpaired surrogate/i);
      expect(error.position).toBe(position);
    });

    it.each([
      ['escaped', '"\\ud83d\\ude00"'],
      ['raw', '"\ud83d\ude00"'],
      ['escaped with upper-case hex', '"\\uD83D\\uDE00"'],
      ['raw high then escaped low', '"\ud83d\\ude00"'],
      ['escaped high then raw low', '"\\ud83d\ude00"'],
    ])('accepts a %s surrogate pair', (_, text) => {
      expect(parseJson(text).value).toBe('😀');
    });
  });

  describe('depth limit', () => {
    it('accepts nesting of exactly maxDepth levels', () => {
      expect(() => parseJson(nested(64))).not.toThrow();
      expect(() => parseJson(nested(3), { maxDepth: 3 })).not.toThrow();
      expect(() => parseJson('{"a":{"b":[1]}}', { maxDepth: 3 })).not.toThrow();
    });

    it('rejects nesting of maxDepth + 1 levels with the position of the offending bracket', () => {
      const error = syntaxError(nested(65));
      expect(error.message).toBe('JSON nesting is deeper than 64 levels at position 64');
      expect(error.position).toBe(64);
      expect(syntaxError('{"a":{"b":[[]]}}', { maxDepth: 3 }).position).toBe(11);
    });

    it('counts empty containers as a level', () => {
      expect(syntaxError('[[]]', { maxDepth: 1 }).position).toBe(1);
    });

    it('accepts only scalars when maxDepth is 0', () => {
      expect(parseJson('1', { maxDepth: 0 }).value).toBe(1);
      expect(syntaxError('[]', { maxDepth: 0 }).position).toBe(0);
    });

    it('rejects 100000 nested brackets quickly without overflowing the stack', () => {
      const started = Date.now();
      expect(syntaxError('['.repeat(100_000)).position).toBe(64);
      expect(syntaxError('{"a":'.repeat(100_000)).position).toBe(320);
      expect(Date.now() - started).toBeLessThan(1000);
    });

    it('handles 100000 nested brackets without a stack overflow when the limit allows them', () => {
      expect(() => parseJson(nested(100_000), { maxDepth: 100_000 })).not.toThrow();
    });

    it('rejects a maxDepth that is not a non-negative integer', () => {
      expect(() => parseJson('1', { maxDepth: -1 })).toThrow(RangeError);
      expect(() => parseJson('1', { maxDepth: 1.5 })).toThrow(RangeError);
    });
  });

  describe('numberSource', () => {
    it('gives the exact source text of a number in an object', () => {
      const parsed = parseJson('{"id": 9223372036854775807}');
      const value = parsed.value as { id: number };
      expect(parsed.numberSource(value, 'id')).toBe('9223372036854775807');
      expect(value.id).toBe(Number('9223372036854775807'));
    });

    it('gives the exact source text of numbers in an array by index', () => {
      const parsed = parseJson('[1.0, 1e2, -0, 0.10, 2E-0]');
      const value = parsed.value as number[];
      expect([0, 1, 2, 3, 4].map((i) => parsed.numberSource(value, i))).toEqual([
        '1.0',
        '1e2',
        '-0',
        '0.10',
        '2E-0',
      ]);
      expect(parsed.numberSource(value, '1')).toBe('1e2');
    });

    it('finds numbers in nested holders and under a "__proto__" key', () => {
      const parsed = parseJson('{"a": [{"b": 1.50}], "__proto__": 7e0}');
      const value = parsed.value as { a: [{ b: number }] };
      expect(parsed.numberSource(value.a[0], 'b')).toBe('1.50');
      expect(parsed.numberSource(value, '__proto__')).toBe('7e0');
    });

    it('gives undefined for slots that are not numbers or do not exist', () => {
      const parsed = parseJson('{"s": "1", "n": null, "o": {}, "l": [true]}');
      const value = parsed.value as { l: unknown[] };
      for (const key of ['s', 'n', 'o', 'l', 'missing', 'toString']) {
        expect(parsed.numberSource(value, key)).toBeUndefined();
      }
      expect(parsed.numberSource(value.l, 0)).toBeUndefined();
      expect(parsed.numberSource({ x: 1 }, 'x')).toBeUndefined();
    });

    it('gives undefined once the slot no longer holds the parsed number', () => {
      const parsed = parseJson('{"a": 1, "b": 2}');
      const value = parsed.value as Record<string, unknown>;
      value['a'] = '1';
      value['b'] = 3;
      expect(parsed.numberSource(value, 'a')).toBeUndefined();
      expect(parsed.numberSource(value, 'b')).toBeUndefined();
    });
  });
});
