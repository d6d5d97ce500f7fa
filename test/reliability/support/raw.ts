import net from 'node:net';
import type { Answer, Target } from './http';

/** A response read off the wire by hand. */
export interface ParsedResponse extends Answer {
  /** Bytes after this response (a second response, or nothing). */
  readonly rest: Buffer;
}

/**
 * Parses one HTTP/1.x response from the start of `data`: undefined while incomplete, a string
 * saying what is wrong when it is not HTTP.
 */
export function parseResponse(data: Buffer, noBody: boolean): ParsedResponse | string | undefined {
  const headEnd = data.indexOf('\r\n\r\n');
  if (headEnd === -1) {
    const start = data.subarray(0, 7).toString('latin1');
    return 'HTTP/1.'.startsWith(start)
      ? undefined
      : `not an HTTP response: ${JSON.stringify(data.subarray(0, 80).toString('latin1'))}`;
  }
  const lines = data.subarray(0, headEnd).toString('latin1').split('\r\n');
  const statusLine = /^HTTP\/1\.[01] (\d{3}) [^\r\n]*$/.exec(lines[0] ?? '');
  if (statusLine === null) return `bad status line ${JSON.stringify(lines[0])}`;
  const status = Number(statusLine[1]);
  const headers: Record<string, string> = {};
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(':');
    if (colon <= 0) return `bad header line ${JSON.stringify(line)}`;
    const name = line.slice(0, colon).toLowerCase();
    const value = line.slice(colon + 1).trim();
    headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
  }
  let offset = headEnd + 4;
  let body: Buffer = Buffer.alloc(0);
  if (noBody || status === 204 || status === 304 || (status >= 100 && status < 200)) {
    // No body.
  } else if (headers['transfer-encoding']?.toLowerCase() === 'chunked') {
    const chunks: Buffer[] = [];
    for (;;) {
      const lineEnd = data.indexOf('\r\n', offset);
      if (lineEnd === -1) return undefined;
      const size = parseInt(data.subarray(offset, lineEnd).toString('latin1'), 16);
      if (Number.isNaN(size)) return 'bad chunk size';
      if (data.length < lineEnd + 2 + size + 2) return undefined;
      chunks.push(data.subarray(lineEnd + 2, lineEnd + 2 + size));
      offset = lineEnd + 2 + size + 2;
      if (size === 0) break;
    }
    body = Buffer.concat(chunks);
  } else if (headers['content-length'] !== undefined) {
    const length = Number(headers['content-length']);
    if (data.length < offset + length) return undefined;
    body = data.subarray(offset, offset + length);
    offset += length;
  } else {
    return 'a response with neither Content-Length nor chunked body';
  }
  return { status, headers, body, rest: data.subarray(offset) };
}

export interface RawOutcome {
  readonly data: Buffer;
  /** The first response, when one arrived whole. */
  readonly response?: ParsedResponse;
  /** What was wrong with the bytes, when they were not a response. */
  readonly malformed?: string;
  readonly closedByServer: boolean;
  /** Neither a response nor a close within maxMs. */
  readonly hung: boolean;
  /** The client ended its side of the connection, after `idleMs` without an answer. */
  readonly halfClosed: boolean;
}

/**
 * Writes raw bytes on a new connection and reads the first response. When nothing comes back within
 * `idleMs` (the server may be waiting for the rest of a request), the client half-closes; the
 * server must then answer or close within `maxMs`.
 */
export function rawExchange(
  target: Target,
  request: Buffer,
  { noBody, idleMs = 150, maxMs = 3000 }: { noBody: boolean; idleMs?: number; maxMs?: number },
): Promise<RawOutcome> {
  return new Promise((resolve) => {
    const socket = net.connect(target.port, target.host);
    const chunks: Buffer[] = [];
    let settled = false;
    let halfClosed = false;
    const finish = (outcome: Omit<RawOutcome, 'data' | 'halfClosed'>) => {
      if (settled) return;
      settled = true;
      clearTimeout(idle);
      clearTimeout(deadline);
      socket.destroy();
      resolve({ data: Buffer.concat(chunks), halfClosed, ...outcome });
    };
    const check = (closed: boolean) => {
      let data: Buffer = Buffer.concat(chunks);
      let parsed = data.length === 0 ? undefined : parseResponse(data, noBody);
      // Skip interim answers (100 Continue) to the final one.
      while (typeof parsed === 'object' && parsed.status < 200) {
        data = parsed.rest;
        parsed = data.length === 0 ? undefined : parseResponse(data, noBody);
      }
      if (typeof parsed === 'object')
        finish({ response: parsed, closedByServer: closed, hung: false });
      else if (typeof parsed === 'string')
        finish({ malformed: parsed, closedByServer: closed, hung: false });
      else if (closed) {
        finish(
          data.length === 0
            ? { closedByServer: true, hung: false }
            : {
                malformed: 'the connection closed in the middle of a response',
                closedByServer: true,
                hung: false,
              },
        );
      }
    };
    const idle = setTimeout(() => {
      halfClosed = true;
      socket.end();
    }, idleMs);
    const deadline = setTimeout(() => finish({ closedByServer: false, hung: true }), maxMs);
    socket.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      idle.refresh();
      check(false);
    });
    socket.on('error', () => check(true));
    socket.on('close', () => check(true));
    socket.on('connect', () => socket.write(request));
  });
}

/** The whole responses at the start of `data`, up to the first that is incomplete or not HTTP. */
export function wholeResponsesIn(data: Buffer): ParsedResponse[] {
  const responses: ParsedResponse[] = [];
  let rest = data;
  while (rest.length > 0) {
    const parsed = parseResponse(rest, false);
    if (typeof parsed !== 'object') break;
    responses.push(parsed);
    rest = parsed.rest;
  }
  return responses;
}

/** Every whole response in `data`, in order; fails on bytes that are not one. */
export function responsesIn(data: Buffer): ParsedResponse[] {
  const responses = wholeResponsesIn(data);
  const rest = responses.length === 0 ? data : responses[responses.length - 1]!.rest;
  if (rest.length > 0) {
    throw new Error(
      `Not a whole response after ${responses.length}: ${String(parseResponse(rest, false))}`,
    );
  }
  return responses;
}

/**
 * A POST /plants of the plant `id` named `name`, with `token`, as raw HTTP/1.1: its header lines,
 * each ended by CRLF but without the empty line after them, and its body; for a test that sends
 * them apart.
 */
export function rawCreateParts(
  token: string,
  id: number | bigint,
  name = 'x',
): { readonly head: string; readonly body: string } {
  const body = `{"id":${id},"name":${JSON.stringify(name)}}`;
  const head =
    `POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n` +
    `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n`;
  return { head, body };
}

/** The same request whole, ready to write (see rawCreateParts). */
export function rawCreate(token: string, id: number | bigint, name = 'x'): string {
  const { head, body } = rawCreateParts(token, id, name);
  return `${head}\r\n${body}`;
}
