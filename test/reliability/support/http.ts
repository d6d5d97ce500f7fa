import http from 'node:http';
import net from 'node:net';

/** Where a server listens. */
export interface Target {
  readonly host: string;
  readonly port: number;
}

export function targetOf(baseUrl: string): Target {
  const url = new URL(baseUrl);
  return { host: url.hostname, port: Number(url.port) };
}

/** One HTTP request as the tests describe it; a body is always framed explicitly. */
export interface Outgoing {
  readonly method: string;
  readonly path: string;
  readonly headers?: Readonly<Record<string, string | readonly string[]>>;
  readonly body?: Buffer | string | undefined;
  /** Send the body with Transfer-Encoding: chunked (in two chunks) instead of Content-Length. */
  readonly chunked?: boolean | undefined;
}

/** A complete response. */
export interface Answer {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: Buffer;
}

export interface SendOptions {
  /** A keep-alive agent to reuse connections; `false` for a connection of its own. */
  readonly agent?: http.Agent | false;
  readonly timeoutMs?: number;
}

/** A keep-alive agent: one per test or per client loop, destroyed at the end. */
export function keepAliveAgent(maxSockets: number): http.Agent {
  return new http.Agent({ keepAlive: true, maxSockets, maxFreeSockets: maxSockets });
}

/**
 * Sends one request with node:http and resolves with the whole response; rejects when the
 * connection fails or closes without one, or after `timeoutMs`.
 */
export function send(
  target: Target,
  outgoing: Outgoing,
  options: SendOptions = {},
): Promise<Answer> {
  const timeoutMs = options.timeoutMs ?? 10_000;
  return new Promise<Answer>((resolve, reject) => {
    const headers: Record<string, string | string[]> = {};
    for (const [name, value] of Object.entries(outgoing.headers ?? {})) {
      headers[name] = typeof value === 'string' ? value : [...value];
    }
    const body =
      outgoing.body === undefined
        ? undefined
        : typeof outgoing.body === 'string'
          ? Buffer.from(outgoing.body, 'utf8')
          : outgoing.body;
    if (body !== undefined) {
      if (outgoing.chunked === true) headers['Transfer-Encoding'] = 'chunked';
      else headers['Content-Length'] = String(body.length);
    }
    let request: http.ClientRequest;
    try {
      request = http.request({
        host: target.host,
        port: target.port,
        method: outgoing.method,
        path: outgoing.path,
        headers,
        agent: options.agent ?? false,
      });
    } catch (error) {
      reject(error instanceof Error ? error : new Error(String(error)));
      return;
    }
    const timer = setTimeout(() => {
      request.destroy(new Error(`no complete response within ${timeoutMs} ms`));
    }, timeoutMs);
    request.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    request.once('response', (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.once('error', (error) => {
        clearTimeout(timer);
        reject(error);
      });
      response.once('end', () => {
        clearTimeout(timer);
        resolve({
          status: response.statusCode ?? 0,
          headers: response.headers,
          body: Buffer.concat(chunks),
        });
      });
    });
    if (body !== undefined && outgoing.chunked === true && body.length > 1) {
      const half = Math.floor(body.length / 2);
      request.write(body.subarray(0, half));
      request.end(body.subarray(half));
    } else {
      request.end(body);
    }
  });
}

/** The token header for a request to /plants. */
export function bearer(token: string): Record<string, string> {
  return { Authorization: `Bearer ${token}` };
}

/** POST /plants with a JSON text sent exactly as given. */
export function createPlant(
  target: Target,
  token: string,
  json: string | Buffer,
  options: SendOptions = {},
): Promise<Answer> {
  return send(
    target,
    {
      method: 'POST',
      path: '/plants',
      headers: { ...bearer(token), 'Content-Type': 'application/json' },
      body: json,
    },
    options,
  );
}

/** DELETE /plants/{id}. */
export function deletePlant(
  target: Target,
  token: string,
  id: bigint | string,
  options: SendOptions = {},
): Promise<Answer> {
  return send(target, { method: 'DELETE', path: `/plants/${id}`, headers: bearer(token) }, options);
}

/** Resolves when a TCP connection to the target opens, rejects with its error (e.g. ECONNREFUSED). */
export function connect(target: Target, timeoutMs = 5000): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(target.port, target.host);
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no connection within ${timeoutMs} ms`));
    }, timeoutMs);
    socket.once('connect', () => {
      clearTimeout(timer);
      resolve(socket);
    });
    socket.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
  });
}

/** A connection that has sent its requests and reads nothing until its socket is resumed. */
export interface NonReadingClient {
  readonly socket: net.Socket;
  /** Settles once the connection has closed. */
  readonly closed: Promise<void>;
  /** Whether it has closed yet. */
  readonly isClosed: () => boolean;
}

/** Connects, pauses the socket, and sends `requests` at once; see NonReadingClient. */
export async function nonReadingClient(
  target: Target,
  requests: string,
): Promise<NonReadingClient> {
  const socket = await connect(target);
  socket.pause();
  socket.on('error', () => undefined);
  let isClosed = false;
  const closed = new Promise<void>((resolve) =>
    socket.once('close', () => {
      isClosed = true;
      resolve();
    }),
  );
  socket.write(requests);
  return { socket, closed, isClosed: () => isClosed };
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Runs `worker` on `concurrency` parallel loops until each returns. */
export async function inParallel(
  concurrency: number,
  worker: (loop: number) => Promise<void>,
): Promise<void> {
  await Promise.all(Array.from({ length: concurrency }, (_, loop) => worker(loop)));
}

/** Maps items with at most `concurrency` in flight, keeping their order. */
export async function mapLimit<T, R>(
  items: readonly T[],
  concurrency: number,
  map: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  await inParallel(Math.min(concurrency, items.length), async () => {
    while (next < items.length) {
      const index = next++;
      results[index] = await map(items[index] as T, index);
    }
  });
  return results;
}
