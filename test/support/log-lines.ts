import { createLogger, type Logger } from '../../src/logger';
import type { RunningServer } from './server-process';

/** One JSON line of the server's log. */
export type LogLine = Record<string, unknown>;

/**
 * Every JSON line the server has logged so far (other output, such as a printed token, left out),
 * without a last line still being written.
 */
export function logLinesOf(server: Pick<RunningServer, 'stdout'>): LogLine[] {
  const output = server.stdout();
  return output
    .slice(0, output.lastIndexOf('\n') + 1)
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as LogLine);
}

/**
 * A logger of the service's kind whose every line goes, parsed, to `onLine` (with its text). A
 * write may hold several lines: request lines of one event-loop turn go together.
 */
export function capturingLogger<T = LogLine>(onLine: (entry: T, text: string) => void): Logger {
  return createLogger({
    level: 'info',
    destination: {
      write(chunk: string) {
        for (const line of chunk.split('\n')) {
          if (line !== '') onLine(JSON.parse(line) as T, line);
        }
      },
    },
  });
}

/** The lines of the server's log so far that carry `reqId`. */
export function linesOf(server: Pick<RunningServer, 'stdout'>, reqId: string): LogLine[] {
  return logLinesOf(server).filter((line) => line['reqId'] === reqId);
}

/** Resolves once `done()` holds, checking every 20 ms; rejects naming `what` after `timeoutMs`. */
export async function waitFor(what: string, done: () => boolean, timeoutMs = 3000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/**
 * The request line logged for `reqId`, once it is written (lines are written in batches, at least
 * every 100 ms); rejects when none comes within `timeoutMs`.
 */
export async function requestLineOf(
  server: Pick<RunningServer, 'stdout'>,
  reqId: string,
  timeoutMs = 3000,
): Promise<LogLine> {
  const find = () => linesOf(server, reqId).find((line) => line['message'] === 'request');
  await waitFor(`the request line of ${reqId}`, () => find() !== undefined, timeoutMs);
  return find()!;
}
