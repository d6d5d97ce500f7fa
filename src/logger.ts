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
