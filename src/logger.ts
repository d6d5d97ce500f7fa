/** Where the service reports what it does; one JSON object per line. */
export interface Logger {
  info(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

/** A logger that writes JSON lines to a stream. */
export function createJsonLogger(stream: NodeJS.WritableStream): Logger {
  const write = (level: string, message: string, fields?: Record<string, unknown>) => {
    stream.write(
      `${JSON.stringify({ time: new Date().toISOString(), level, message, ...fields })}\n`,
    );
  };
  return {
    info: (message, fields) => write('info', message, fields),
    error: (message, fields) => write('error', message, fields),
  };
}

/** A logger that drops everything. */
export const silentLogger: Logger = { info() {}, error() {} };
