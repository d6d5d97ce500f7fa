import { boundLineWrites, fitLogLine } from '../src/logger';

const PIPE_BUF = 4096;

/** A request line as the service writes it, with `path` in it. */
function requestLine(path: string): string {
  return (
    `{"level":30,"time":"2026-11-27T12:00:00.000Z","pid":42,"reqId":"r-1","operationId":"deletePlant"` +
    `,"req":{"method":"DELETE","path":${JSON.stringify(path)}},"res":{"status":400},"latencyMs":0.4` +
    `,"message":"request"}`
  );
}

const bytes = (text: string) => Buffer.byteLength(text);

/** What fitLogLine must keep of `original`: every field, each string a prefix of its own. */
function expectCutFrom(
  fitted: string,
  original: string,
  maxBytes: number,
): Record<string, unknown> {
  expect(bytes(fitted)).toBeLessThanOrEqual(maxBytes);
  // Whole characters only: decoding the UTF-8 and encoding it again gives back the same text.
  expect(Buffer.from(fitted).toString('utf8')).toBe(fitted);
  const cut = JSON.parse(fitted) as Record<string, unknown>;
  expect(cut['truncated']).toBe(true);
  const fields: Record<string, unknown> = { ...cut };
  delete fields['truncated'];
  expectPrefixes(fields, JSON.parse(original));
  return cut;
}

/** Every value of `cut` is that of `whole`, or for a string a prefix of it ending in an ellipsis. */
function expectPrefixes(cut: unknown, whole: unknown): void {
  if (typeof cut === 'string' && cut !== whole) {
    expect(cut.endsWith('…')).toBe(true);
    expect((whole as string).startsWith(cut.slice(0, -1))).toBe(true);
  } else if (typeof cut === 'object' && cut !== null) {
    expect(Object.keys(cut)).toEqual(Object.keys(whole as object));
    for (const [key, value] of Object.entries(cut)) {
      expectPrefixes(value, (whole as Record<string, unknown>)[key]);
    }
  } else {
    expect(cut).toEqual(whole);
  }
}

describe('fitLogLine', () => {
  it('returns a line that fits as it is', () => {
    const line = requestLine('/plants/1');
    expect(fitLogLine(line, bytes(line))).toBe(line);
  });

  it('cuts a long path to fit exactly, marks the line, and keeps every other field', () => {
    const path = `/plants/${'9'.repeat(6000)}`;
    const fitted = fitLogLine(requestLine(path), PIPE_BUF - 1);
    const cut = expectCutFrom(fitted, requestLine(path), PIPE_BUF - 1);
    // Only what had to go: the line is as long as allowed, to the byte.
    expect(bytes(fitted)).toBe(PIPE_BUF - 1);
    expect((cut['req'] as { path: string }).path.length).toBeGreaterThan(3800);
    expect(cut['res']).toEqual({ status: 400 });
  });

  it.each([
    ['two-byte characters', 'é'],
    ['three-byte characters', '植'],
    ['four-byte characters (surrogate pairs)', '🌱'],
    ['escaped quotes and backslashes', '"\\'],
    ['escaped control characters', '\u0001\n'],
    ['a mix', 'a植🌱"é\u0007'],
  ])('never splits a character or an escape sequence: %s', (_name, unit) => {
    // From just past the bound, whatever the unit's bytes in JSON, so that every cut point is met.
    const unitBytes = bytes(JSON.stringify(unit)) - 2;
    const first = Math.ceil(PIPE_BUF / unitBytes);
    for (let length = first; length < first + 40; length++) {
      const original = requestLine(`/plants/${unit.repeat(length)}`);
      expectCutFrom(fitLogLine(original, PIPE_BUF - 1), original, PIPE_BUF - 1);
    }
  });

  it('cuts the longest strings first, as many as it takes, and leaves keys and numbers alone', () => {
    const error = {
      level: 50,
      time: 1_700_000_000_000,
      id: 0,
      err: { message: 'm'.repeat(3000), stack: 's'.repeat(5000), code: 'SQLITE_IOERR' },
      ['k'.repeat(200)]: 'short',
      message: 'the request failed',
    };
    // A number beyond what a double holds, as a logger could write it.
    const original = JSON.stringify(error).replace('"id":0,', '"id":9007199254740993,');
    const fitted = fitLogLine(original, 1000);
    expectCutFrom(fitted, original, 1000);
    // The number is kept as it was written, beyond what a double holds.
    expect(fitted).toContain('"id":9007199254740993,');
    expect(fitted).toContain(`"${'k'.repeat(200)}":"short"`);
    const { err } = JSON.parse(fitted) as { err: Record<string, string> };
    expect(err['code']).toBe('SQLITE_IOERR');
    // Both long strings were cut, the stack first (the longest).
    expect(err['message']!.length).toBeLessThan(3000);
    expect(err['stack']!.length).toBeLessThan(5000);
  });

  it('leaves a line it cannot fit as it is: not JSON, or no string long enough to cut', () => {
    const text = 'x'.repeat(5000);
    expect(fitLogLine(text, PIPE_BUF)).toBe(text);
    const numbers = JSON.stringify({ values: Array.from({ length: 2000 }, (_, i) => i) });
    expect(fitLogLine(numbers, PIPE_BUF)).toBe(numbers);
  });
});

describe('boundLineWrites', () => {
  /** A stream that keeps each write it is given. */
  function keepingStream() {
    const writes: string[] = [];
    const stream = {
      write(chunk: string): boolean {
        writes.push(chunk);
        return true;
      },
    };
    return { stream, writes };
  }

  it('passes writes that fit through as they are, several lines or one', () => {
    const { stream, writes } = keepingStream();
    boundLineWrites(stream, PIPE_BUF);
    const lines = `${requestLine('/plants/1')}\n`.repeat(20);
    const plain = '\nCreated a development token\n\n';
    stream.write(lines);
    stream.write(plain);
    expect(writes).toEqual([lines, plain]);
  });

  it('writes a chunk past the bound a line a write, each cut to fit with its newline', () => {
    const { stream, writes } = keepingStream();
    boundLineWrites(stream, PIPE_BUF);
    const long = requestLine(`/plants/${'x'.repeat(5000)}`);
    const short = requestLine('/plants/2');
    stream.write(`${short}\n\n${long}\n${short}\n`);
    expect(writes.map((write) => write.endsWith('\n'))).toEqual([true, true, true, true]);
    expect(writes[0]).toBe(`${short}\n`);
    expect(writes[1]).toBe('\n');
    expect(bytes(writes[2]!)).toBe(PIPE_BUF);
    expectCutFrom(writes[2]!.slice(0, -1), long, PIPE_BUF - 1);
    expect(writes[3]).toBe(`${short}\n`);
  });
});
