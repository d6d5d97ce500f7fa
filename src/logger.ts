import pino, { type Logger as PinoLogger } from 'pino';

/** The service's logger: pino, one JSON object per line, secrets redacted. */
export type Logger = PinoLogger;

export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';

/** Paths pino censors wherever they appear, whatever a caller logs. */
const REDACT = [
  'authorization',
  '*.authorization',
  'headers.authorization',
  '*.headers.authorization',
  'token',
  '*.token',
  'secret',
  '*.secret',
];

/**
 * Writes out everything `stream` (a pino destination) holds, then calls `done` once: after two
 * flushes in a row that wrote nothing, or at once on EPIPE (nobody reads it any more). One flush
 * is not enough: a flush's callback comes on 'drain', which may leave up to minLength bytes
 * unwritten, and a flush asked for while a write is under way (the periodic flush's write of
 * nothing, every 100 ms) is answered by that write's end, before the lines that came meanwhile
 * are written (a worker stopped at once lost its last lines). A stream that fails every write ends
 * the same way, after two flushes.
 */
export function flushUntilIdle(stream: pino.DestinationStream & SonicBoomLike, done: () => void) {
  let written = 0;
  let idleFlushes = 0;
  stream.on('write', (bytes: number) => (written += bytes));
  // Its error, if any, is of the fsync after the drain (EINVAL on a pipe or a terminal) or of a write.
  const flushRest = (error?: Error | null) => {
    if ((error as NodeJS.ErrnoException | null | undefined)?.code === 'EPIPE') return done();
    idleFlushes = written === 0 ? idleFlushes + 1 : 0;
    if (idleFlushes === 2) return done();
    written = 0;
    stream.flush(flushRest);
  };
  stream.flush(flushRest);
}

/** What flushUntilIdle needs of sonic-boom, pino's asynchronous destination. */
interface SonicBoomLike {
  on(event: 'write', listener: (bytes: number) => void): unknown;
  flush(callback: (error?: Error | null) => void): void;
}

/** pino-pretty is a development dependency: an install without them logs JSON instead. */
function prettyAvailable(): boolean {
  try {
    require.resolve('pino-pretty');
    return true;
  } catch {
    return false;
  }
}

/** A JSON-lines logger at `level`; `pretty` renders readable lines for a person at a terminal. */
export function createLogger(options: {
  level: LogLevel;
  pretty?: boolean;
  destination?: pino.DestinationStream;
}): Logger {
  const base: pino.LoggerOptions = {
    level: options.level,
    messageKey: 'message',
    base: { pid: process.pid },
    redact: { paths: REDACT, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  if (options.pretty && prettyAvailable()) {
    return pino({
      ...base,
      transport: { target: 'pino-pretty', options: { messageKey: 'message', translateTime: true } },
    });
  }
  return pino(base, options.destination ?? pino.destination({ sync: true }));
}

/** The field a JSON log line gains when its longest strings were cut to fit (see fitLogLine). */
const TRUNCATED = ',"truncated":true';
/** What ends a string that was cut. */
const ELLIPSIS = '…';
const ELLIPSIS_BYTES = Buffer.byteLength(ELLIPSIS);

/** The UTF-8 bytes of the JSON text's unit at `at`: an escape sequence, or one character. */
function unitAt(text: string, at: number): { chars: number; bytes: number } {
  const code = text.charCodeAt(at);
  if (code === 0x5c) return text[at + 1] === 'u' ? { chars: 6, bytes: 6 } : { chars: 2, bytes: 2 };
  if (code < 0x80) return { chars: 1, bytes: 1 };
  if (code < 0x800) return { chars: 1, bytes: 2 };
  const next = text.charCodeAt(at + 1);
  if (code >= 0xd800 && code <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
    return { chars: 2, bytes: 4 };
  }
  return { chars: 1, bytes: 3 };
}

/**
 * The contents (between the quotes) of the longest string value of a JSON text without
 * whitespace (pino's), by characters; keys are left alone.
 */
function longestString(json: string): { start: number; end: number } | undefined {
  let longest: { start: number; end: number } | undefined;
  for (let at = json.indexOf('"'); at !== -1;) {
    const start = at + 1;
    let end = start;
    while (end < json.length && json[end] !== '"') end += json[end] === '\\' ? 2 : 1;
    const isKey = json[end + 1] === ':';
    if (!isKey && (longest === undefined || end - start > longest.end - longest.start)) {
      longest = { start, end };
    }
    at = json.indexOf('"', end + 1);
  }
  return longest;
}

/**
 * `line` (a JSON object, without its newline) in at most `maxBytes` of UTF-8: when longer, its
 * longest strings are cut, each ending in an ellipsis, until it fits, and it gains
 * `"truncated":true`; numbers, keys and the order of fields stay as they were, and escape
 * sequences and characters are never split. A line that is not a JSON object, or that no cut of
 * its strings brings within `maxBytes`, is returned as it is.
 */
export function fitLogLine(line: string, maxBytes: number): string {
  let bytes = Buffer.byteLength(line);
  if (bytes <= maxBytes || !line.startsWith('{') || !line.endsWith('}')) return line;
  // The object without its closing brace, which comes back after the field that marks the cut.
  let json = line.slice(0, -1);
  bytes -= 1;
  const budget = maxBytes - Buffer.byteLength(TRUNCATED) - 1;
  while (bytes > budget) {
    const longest = longestString(json);
    // A string of a few characters saves nothing once it ends in the ellipsis.
    if (longest === undefined || longest.end - longest.start <= ELLIPSIS_BYTES) return line;
    let contentBytes = 0;
    for (let at = longest.start; at < longest.end;) {
      const unit = unitAt(json, at);
      contentBytes += unit.bytes;
      at += unit.chars;
    }
    // Keep the longest run of whole units that leaves room for the ellipsis and the excess.
    const keepBytes = contentBytes - (bytes - budget) - ELLIPSIS_BYTES;
    let kept = longest.start;
    let keptBytes = 0;
    while (kept < longest.end) {
      const unit = unitAt(json, kept);
      if (keptBytes + unit.bytes > keepBytes) break;
      kept += unit.chars;
      keptBytes += unit.bytes;
    }
    json = json.slice(0, kept) + ELLIPSIS + json.slice(longest.end);
    bytes += keptBytes + ELLIPSIS_BYTES - contentBytes;
  }
  return `${json}${TRUNCATED}}`;
}

/**
 * Makes every write of `stream` (a pino destination) go in lines of at most `maxBytes` with their
 * newline, each JSON line cut to fit by fitLogLine: where several processes write to one pipe,
 * only a write of at most PIPE_BUF bytes goes in whole, and a longer one (a request line with a
 * path of kilobytes, an error's stack) could be cut by another process's lines. Writes that fit,
 * one line or several, go through as they are.
 */
export function boundLineWrites(stream: { write(chunk: string): boolean }, maxBytes: number): void {
  const write = stream.write.bind(stream);
  // A UTF-16 code unit is at most 3 bytes of UTF-8: a string this short fits without counting.
  const surelyFits = Math.floor(maxBytes / 3);
  stream.write = (chunk: string) => {
    if (chunk.length <= surelyFits || Buffer.byteLength(chunk) <= maxBytes) return write(chunk);
    const lines = chunk.split('\n');
    // What follows the last newline: nothing, when the chunk ends with its line's newline.
    const rest = lines.pop() as string;
    let written = true;
    for (const line of lines) written = write(`${fitLogLine(line, maxBytes - 1)}\n`);
    return rest === '' ? written : write(fitLogLine(rest, maxBytes));
  };
}
