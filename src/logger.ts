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
