import type http from 'node:http';
import { Socket } from 'node:net';

/**
 * Bytes of a connection that node:http reads, after an answer written before its request's body
 * arrived whole, before the connection stops being read; see limitUnreadBody.
 */
const UNREAD_BODY_DRAIN_BYTES = 64 * 1024;

/**
 * Whether a request's answer, about to be written, may leave more of its body unread than the
 * server reads after it (UNREAD_BODY_DRAIN_BYTES): the connection then cannot carry another
 * request. For a Content-Length, when the rest it announces is longer than that; the body received
 * so far waits in the request's buffer (it was not read, or the answer would not come before its
 * end). For a chunked body still arriving, always: its length is not known until its last chunk,
 * and told keep-alive, a client still sending more than the server reads got a reset on its next
 * request.
 */
function leavesBodyUnread(req: http.IncomingMessage): boolean {
  if (req.complete) return false;
  if (req.headers['transfer-encoding'] !== undefined) return true;
  const length = req.headers['content-length'];
  return length !== undefined && Number(length) - req.readableLength > UNREAD_BODY_DRAIN_BYTES;
}

/**
 * Makes the answers written by `Response` say `Connection: close` when they leave their
 * request's body unread past what the server reads after them (leavesBodyUnread): told
 * keep-alive, a client would send its next request on a connection the server is closing (a
 * keep-alive agent of node:http then got ECONNRESET on every second 1 MB POST answered before
 * its body was read).
 * A method of the app's response class (see expressMessageClasses in message-shape.ts), so that
 * no answer is missed (every answer goes through writeHead, which node:http calls itself when the
 * app does not), and one to a request read whole pays one property read.
 */
export function closeWhenBodyIsLeft(Response: typeof http.ServerResponse): void {
  const { writeHead } = Response.prototype;
  Response.prototype.writeHead = function writeHeadClosingWhenBodyIsLeft(
    this: http.ServerResponse,
  ) {
    if (leavesBodyUnread(this.req)) this.shouldKeepAlive = false;
    // eslint-disable-next-line prefer-rest-params -- passed on as they came, without a copy
    return writeHead.apply(this, arguments as unknown as Parameters<typeof writeHead>);
  } as typeof writeHead;
}

/** node:http's mark of a response after which it closes the connection. */
type ClosingResponse = http.ServerResponse & { _last?: boolean };

/**
 * Ends a connection's side without destroying it: in the place of node:http's destroySoon once an
 * answer that closes the connection left its request's body unread (see limitUnreadBody).
 */
function endLingering(this: Socket): void {
  this.end();
}

/** Connections kept open only to read the rest of a body after an answer that closes them. */
const lingering = new WeakSet<Socket>();

/** Whether `socket` is open only to read the rest of a body after its answer (lingerForBody). */
export function isLingering(socket: Socket): boolean {
  return lingering.has(socket);
}

/**
 * Keeps a connection whose answer closes it open while its request's body still arrives; see
 * limitUnreadBody. Once the body has arrived whole, the connection is closed as node:http would
 * have closed it; a shutdown closes it at once (closeGracefully in server.ts).
 */
function lingerForBody(req: http.IncomingMessage, socket: Socket): void {
  lingering.add(socket);
  socket.destroySoon = endLingering;
  req.once('end', () => Socket.prototype.destroySoon.call(socket));
}

/**
 * After an answer written before its request's body arrived whole (an error decided from the
 * headers, such as a 401 or a 404, or a GET, which ignores a body), node:http reads the rest of
 * the body and throws it away, so that the connection can carry the next request: however long
 * the body, for as long as REQUEST_TIMEOUT_MS allows, at a cost per chunk (a million chunks of one
 * byte to `/healthz` took 2.1 s of the server's CPU, no token needed). Here, once it has read
 * UNREAD_BODY_DRAIN_BYTES more of the connection, the server stops reading it and closes its side
 * (0.1 to 0.2 s for the same million chunks): the client can still read its answer, and the
 * connection is dropped when its idle time-out passes, or when the client closes it.
 *
 * An answer that closes the connection (the client asked for it, or closeWhenBodyIsLeft decided
 * it) is handled the same way. node:http would destroy the connection once the answer is written
 * (destroySoon), while the body still arrives: the kernel then answers what the client still
 * sends with a reset, which fails the client's writes (EPIPE) and may cost it the answer, unread.
 * Here its side is ended instead and the rest read as above (RFC 9112 section 9.6); the
 * connection goes once the body has arrived whole, when the client closes it, or at
 * REQUEST_TIMEOUT_MS from its request's start.
 */
export function limitUnreadBody(req: http.IncomingMessage, res: http.ServerResponse): void {
  // At 'prefinish' (node:http's, emitted once the answer is written whole), before node:http
  // decides at 'finish' to drop the rest of the body unseen, or to destroy the connection: read
  // here instead, it can be counted.
  res.once('prefinish', () => {
    if (req.complete) return;
    const { socket } = req;
    if ((res as ClosingResponse)._last === true) lingerForBody(req, socket);
    const stopAt = socket.bytesRead + UNREAD_BODY_DRAIN_BYTES;
    const check = () => {
      if (socket.bytesRead <= stopAt) return;
      req.off('data', check);
      // Both paused: a request still flowing would resume the connection to read more.
      req.pause();
      socket.pause();
      socket.end();
    };
    req.on('data', check);
  });
}
