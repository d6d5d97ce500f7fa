import http from 'node:http';
import type { Socket } from 'node:net';
import type { HttpServerConfig } from './config';

const STATUS_TEXT: Readonly<Record<number, string>> = {
  400: 'The request could not be parsed as HTTP/1.1.',
  408: 'The request took too long to arrive.',
  431: 'The request headers are too large.',
};

/** Answers a request Node rejected before it reached the app, in the contract's Error shape. */
function answerClientError(error: NodeJS.ErrnoException, socket: Socket): void {
  if (!socket.writable || (error as { bytesParsed?: number }).bytesParsed === undefined) {
    socket.destroy();
    return;
  }
  const status =
    error.code === 'HPE_HEADER_OVERFLOW'
      ? 431
      : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? 408
        : 400;
  const body = JSON.stringify({ error: status, message: STATUS_TEXT[status] });
  socket.end(
    `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\n` +
      'Content-Type: application/json; charset=utf-8\r\n' +
      'X-Content-Type-Options: nosniff\r\n' +
      'Cache-Control: no-store\r\n' +
      `Content-Length: ${Buffer.byteLength(body)}\r\n` +
      'Connection: close\r\n\r\n' +
      body,
  );
}

/**
 * The HTTP server around the app, with deliberate limits: headers must arrive within
 * headersTimeoutMs (slow clients are cut off), a whole request within requestTimeoutMs, idle
 * keep-alive connections close after keepAliveTimeoutMs, and headers over maxHeaderBytes get 431.
 */
export function createHttpServer(app: http.RequestListener, config: HttpServerConfig): http.Server {
  const server = http.createServer(
    {
      headersTimeout: config.headersTimeoutMs,
      requestTimeout: config.requestTimeoutMs,
      keepAliveTimeout: config.keepAliveTimeoutMs,
      maxHeaderSize: config.maxHeaderBytes,
      // How often Node checks the two time-outs above; its default (30 s) would let them overrun.
      connectionsCheckingInterval: Math.min(1000, config.headersTimeoutMs),
    },
    app,
  );
  server.on('clientError', answerClientError);
  return server;
}

/**
 * Stops accepting connections, lets in-flight requests finish for up to `deadlineMs`, then closes
 * what is left; resolves once the server is closed.
 */
export function closeGracefully(server: http.Server, deadlineMs: number): Promise<void> {
  return new Promise((resolve) => {
    const deadline = setTimeout(() => server.closeAllConnections(), deadlineMs);
    deadline.unref();
    server.close(() => {
      clearTimeout(deadline);
      resolve();
    });
    server.closeIdleConnections();
  });
}
