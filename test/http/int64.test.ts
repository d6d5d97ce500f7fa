import {
  INT64_MAX,
  INT64_MIN,
  int64FromJsonNumber,
  parseCanonicalInt64,
} from '../../src/http/int64';

describe('INT64_MIN and INT64_MAX', () => {
  it('are the bounds of a signed 64-bit integer', () => {
    expect(INT64_MIN).toBe(-9223372036854775808n);
    expect(INT64_MAX).toBe(9223372036854775807n);
    expect(BigInt.asIntN(64, INT64_MIN)).toBe(INT64_MIN);
    expect(BigInt.asIntN(64, INT64_MAX)).toBe(INT64_MAX);
  });
});

describe('parseCanonicalInt64', () => {
  it.each([
    ['0', 0n],
    ['1', 1n],
    ['-1', -1n],
    ['42', 42n],
    ['9007199254740993', 9007199254740993n],
    ['9223372036854775807', 9223372036854775807n],
    ['-9223372036854775808', -9223372036854775808n],
  ])('accepts %j as %p', (text, expected) => {
    expect(parseCanonicalInt64(text)).toBe(expected);
  });

  it.each([
    '',
    ' ',
    ' 1',
    '1 ',
    '\t1',
    '1\n',
    '-',
    '--1',
    '+1',
    '-0',
    '00',
    '01',
    '-01',
    '1.0',
    '1.',
    '1e2',
    '1E2',
    '0x10',
    '0b1',
    '1_000',
    '1,000',
    '１',
    '٣',
    'NaN',
    'Infinity',
    '1n',
    '9223372036854775808',
    '-9223372036854775809',
    '99999999999999999999',
    '1'.repeat(60_000),
  ])('rejects %j', (text) => {
    expect(parseCanonicalInt64(text)).toBeUndefined();
  });
});

describe('int64FromJsonNumber', () => {
  it.each([
    ['0', 0n],
    ['-0', 0n],
    ['0.0', 0n],
    ['-0.000', 0n],
    ['0e5', 0n],
    ['0e999999999', 0n],
    ['0.0e-999999999', 0n],
    ['1', 1n],
    ['-1', -1n],
    ['1.0', 1n],
    ['1.000000000000000000000000000000', 1n],
    ['1e2', 100n],
    ['1E+2', 100n],
    ['100e-2', 1n],
    ['0.5e1', 5n],
    ['12.5e1', 125n],
    ['9007199254740993', 9007199254740993n],
    ['9223372036854775807', 9223372036854775807n],
    ['-9223372036854775808', -9223372036854775808n],
    ['9.223372036854775807e18', 9223372036854775807n],
    ['-9.223372036854775808E+18', -9223372036854775808n],
    ['922337203685477580.7e1', 9223372036854775807n],
    ['92233720368547758070e-1', 9223372036854775807n],
    ['1e18', 10n ** 18n],
    ['1e00000000000000000000000000002', 100n],
  ])('reads %s as the integer %p', (raw, expected) => {
    expect(int64FromJsonNumber(raw)).toEqual({ ok: true, value: expected });
  });

  it.each([
    '1.5',
    '-1.5',
    '0.1',
    '1500e-3',
    '1.0000000000000000001',
    '1e-1',
    '10e-2',
    '1e-999999999',
    '1e-99999999999999999999999999',
    '9223372036854775807.5',
    '123456789012345678901234567890.5',
  ])('answers not-integer for %s', (raw) => {
    expect(int64FromJsonNumber(raw)).toEqual({ ok: false, reason: 'not-integer' });
  });

  it.each([
    '9223372036854775808',
    '-9223372036854775809',
    '9.223372036854775808e18',
    '1e19',
    '-1e19',
    '10000000000000000000',
    '1e999999999',
    '1e99999999999999999999999999',
    '1.5e30',
  ])('answers out-of-range for %s', (raw) => {
    expect(int64FromJsonNumber(raw)).toEqual({ ok: false, reason: 'out-of-range' });
  });

  it.each(['', '-', '+1', '01', '1.', '.5', '1e', '0x10', ' 1', '1 ', 'NaN', 'Infinity', '１'])(
    'answers not-integer for text that is not a JSON number: %j',
    (raw) => {
      expect(int64FromJsonNumber(raw)).toEqual({ ok: false, reason: 'not-integer' });
    },
  );

  it('is exact where a JS number would round', () => {
    expect(int64FromJsonNumber('9007199254740993')).toEqual({ ok: true, value: 9007199254740993n });
    expect(int64FromJsonNumber('9223372036854775807.0')).toEqual({ ok: true, value: INT64_MAX });
  });

  it('answers quickly for huge exponents and very long digit strings', () => {
    const started = Date.now();
    const longDigits = '9'.repeat(60_000);
    const sparseDigits = `1${'0'.repeat(60_000)}1`;
    expect(int64FromJsonNumber('1e999999999')).toEqual({ ok: false, reason: 'out-of-range' });
    expect(int64FromJsonNumber('1e-999999999')).toEqual({ ok: false, reason: 'not-integer' });
    expect(int64FromJsonNumber(longDigits)).toEqual({ ok: false, reason: 'out-of-range' });
    expect(int64FromJsonNumber(`-${longDigits}`)).toEqual({ ok: false, reason: 'out-of-range' });
    expect(int64FromJsonNumber(sparseDigits)).toEqual({ ok: false, reason: 'out-of-range' });
    expect(int64FromJsonNumber(`0.${sparseDigits}`)).toEqual({ ok: false, reason: 'not-integer' });
    expect(int64FromJsonNumber(`1.${'0'.repeat(60_000)}`)).toEqual({ ok: true, value: 1n });
    expect(int64FromJsonNumber(`${sparseDigits}e-60001`)).toEqual({
      ok: false,
      reason: 'not-integer',
    });
    const scaledDown = `${'9'.repeat(10)}${'0'.repeat(59_990)}e-59990`;
    expect(int64FromJsonNumber(scaledDown)).toEqual({ ok: true, value: 9_999_999_999n });
    expect(Date.now() - started).toBeLessThan(1000);
  });
});
