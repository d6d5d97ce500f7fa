import type http from 'node:http';
import type { Connection } from './client-errors';

/** Per connection, the requests pipelined on it that wait for their turn; see runInTurn. */
interface Turns {
  /** The response to the latest of them. */
  latest: http.ServerResponse;
  /** How many have not started yet. */
  waiting: number;
}

const turnsOf = new WeakMap<Connection, Turns>();

/**
 * Stops node:http reading a connection after the chunk it is parsing, with node:http's own mark, so
 * that neither node:http nor a request reading its body resumes it (runInTurn resumes it itself).
 */
export function stopReading(connection: Connection): void {
  if (connection._paused === true) return;
  connection._paused = true;
  connection.pause();
}

/**
 * Runs `serve` for a request once the request before it on the same connection has been answered
 * whole: requests pipelined on one connection are processed one at a time, in the order they came
 * (RFC 9112 section 9.3.2 lets a server process them side by side only when all are safe), so a
 * DELETE pipelined behind the POST of the same plant finds it. A request with no answer in
 * progress before it, the usual case, runs at once. While requests wait, node:http stops reading
 * the connection after the chunk it is parsing, as it does itself when answers back up (it parses
 * every request of a chunk before it can stop), and reads again once the last of them has started:
 * a client that does not read its answers holds up its own requests, and the server holds at most
 * a chunk of them.
 */
export function runInTurn(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  serve: (req: http.IncomingMessage, res: http.ServerResponse) => void,
): void {
  const connection: Connection = req.socket;
  const current = connection._httpMessage;
  if (current === res || current === null || current === undefined) {
    serve(req, res);
    return;
  }
  // node:http attaches a response to the connection only once those before it are written, so
  // the one on it is the oldest in progress; the latest pipelined one, if still in progress, is
  // the one right before this request.
  let turns = turnsOf.get(connection);
  const before = turns !== undefined && !turns.latest.writableFinished ? turns.latest : current;
  if (turns === undefined) {
    turns = { latest: res, waiting: 0 };
    turnsOf.set(connection, turns);
  }
  turns.latest = res;
  turns.waiting += 1;
  stopReading(connection);
  const waiting = turns;
  let started = false;
  const start = () => {
    if (started) return;
    started = true;
    before.off('finish', start);
    before.off('close', start);
    // The connection can no longer carry an answer (it was reset, timed out, or closes after the
    // answer before): this request is not processed, so that its client may send it again
    // (RFC 9112 section 9.3.2).
    if (!connection.writable) return;
    waiting.waiting -= 1;
    if (waiting.waiting === 0 && connection._paused === true && !connection.destroyed) {
      connection._paused = false;
      connection.parser?.resume?.();
      connection.resume();
    }
    serve(req, res);
  };
  before.on('finish', start);
  before.on('close', start);
}
