import type { RunningServer } from './server-process';

/** One JSON line of the server's log. */
export type LogLine = Record<string, unknown>;

/** The lines of the server's log so far that carry `reqId`. */
export function linesOf(server: Pick<RunningServer, 'stdout'>, reqId: string): LogLine[] {
  return server
    .stdout()
    .split('\n')
    .filter((line) => line.includes(reqId))
    .map((line) => JSON.parse(line) as LogLine)
    .filter((line) => line['reqId'] === reqId);
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
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const line = linesOf(server, reqId).find((candidate) => candidate['message'] === 'request');
    if (line !== undefined) return line;
    if (Date.now() > deadline) throw new Error(`No request line for ${reqId} in the server's log.`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
