import { refusedRequestLevel } from './contract';

/**
 * What a raw request on the wire is, read as RFC 9112 says: either a well-formed request, with the
 * method, target, header lines and body a server must see, or one a server must refuse, and why.
 *
 * Only the robustness exceptions the RFCs allow are read leniently, the way a lenient server may
 * read them: empty lines before the request line (RFC 9112 section 2.2), a bare LF ending a line
 * of the head (section 2.2), a line folded into the one before (obs-fold, section 5.2), a CR or a
 * NUL in a field value replaced by a space (RFC 9110 section 5.5), a Content-Length repeated with
 * the same value (RFC 9110 section 8.6), and a request of HTTP/1.0 framed by Transfer-Encoding
 * (which this server reads as chunked, README). Everything else that does not match the grammar
 * is refused, and so is every framing the RFC calls ambiguous: Transfer-Encoding together with
 * Content-Length, a Transfer-Encoding whose final coding is not chunked, a Content-Length that is
 * not one decimal length, a broken chunked body, and a body shorter than its framing says (section
 * 6.3). A request the server must refuse must never reach the store.
 */
export type RawReading = WellFormedRequest | RefusedRequest;

export interface WellFormedRequest {
  readonly wellFormed: true;
  readonly method: string;
  readonly target: string;
  /** The header lines (folds unfolded, values without their surrounding whitespace), in order. */
  readonly headers: ReadonlyArray<readonly [string, string]>;
  /** The body as its framing delimits it (chunked: decoded); empty without a framing. */
  readonly body: Buffer;
  readonly chunked: boolean;
}

export interface RefusedRequest {
  readonly wellFormed: false;
  /** Why a server must refuse it. */
  readonly why: string;
}

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** A method, a target of visible bytes (obs-text too: no store route has it), a version. */
const REQUEST_LINE = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+) ([!-~\u0080-\u00ff]+) (HTTP\/\d\.\d)$/;

function trimOws(text: string): string {
  return text.replace(/^[ \t]+|[ \t]+$/g, '');
}

function refuse(why: string): RefusedRequest {
  return { wellFormed: false, why };
}

/** Reads the first request in `bytes` (what follows it, if anything, is a request of its own). */
export function readRawRequest(bytes: Buffer): RawReading {
  const text = bytes.toString('latin1');
  const lines: string[] = [];
  let offset = 0;
  for (;;) {
    const lf = text.indexOf('\n', offset);
    if (lf === -1) return refuse('its head never ends (no empty line after it)');
    const line = text.slice(offset, lf).replace(/\r$/, '');
    offset = lf + 1;
    if (line !== '') lines.push(line);
    else if (lines.length > 0) break;
  }
  const [requestLine = '', ...fieldLines] = lines;
  const start = REQUEST_LINE.exec(requestLine);
  if (start === null) return refuse(`its request line ${JSON.stringify(requestLine)} is not one`);
  const [, method = '', target = '', version = ''] = start;
  if (!version.startsWith('HTTP/1.')) return refuse(`its version ${version} is not HTTP/1.x`);

  const headers: Array<[string, string]> = [];
  for (const line of fieldLines) {
    if (/^[ \t]/.test(line)) {
      // obs-fold: one space instead; a line before any header line is ignored (section 2.2).
      const last = headers[headers.length - 1];
      if (last !== undefined) last[1] = trimOws(`${last[1]} ${trimOws(line)}`);
      continue;
    }
    const colon = line.indexOf(':');
    const name = colon === -1 ? '' : line.slice(0, colon);
    if (!TOKEN.test(name)) return refuse(`its header line ${JSON.stringify(line)} is not one`);
    headers.push([name, trimOws(line.slice(colon + 1).replace(/[\r\0]/g, ' '))]);
  }
  const head = [requestLine, ...headers.map(([name, value]) => `${name}: ${value}`)].join('\r\n');
  if (refusedRequestLevel(head)) return refuse('the app refuses its version or Host with 400');

  const values = (lower: string) =>
    headers.filter(([name]) => name.toLowerCase() === lower).map(([, value]) => value);
  const transferEncoding = values('transfer-encoding');
  const contentLength = values('content-length');
  const rest = bytes.subarray(offset);
  const request = { wellFormed: true as const, method, target, headers };
  if (transferEncoding.length > 0) {
    if (contentLength.length > 0) return refuse('it has both Transfer-Encoding and Content-Length');
    const codings = transferEncoding
      .join(',')
      .split(',')
      .map(trimOws)
      .filter((coding) => coding !== '');
    if (codings[codings.length - 1]?.toLowerCase() !== 'chunked') {
      return refuse(`its Transfer-Encoding ${JSON.stringify(codings.join(', '))} is not chunked`);
    }
    const body = dechunk(rest);
    return typeof body === 'string' ? refuse(body) : { ...request, body, chunked: true };
  }
  if (contentLength.length > 0) {
    const lengths = contentLength.join(',').split(',').map(trimOws);
    if (!lengths.every((length) => /^\d+$/.test(length)) || new Set(lengths.map(BigInt)).size > 1) {
      return refuse(
        `its Content-Length ${JSON.stringify(contentLength.join(', '))} is not a length`,
      );
    }
    const length = BigInt(lengths[0] ?? '0');
    if (length > BigInt(rest.length)) {
      return refuse(`its body is shorter (${rest.length}) than its Content-Length (${length})`);
    }
    return { ...request, body: rest.subarray(0, Number(length)), chunked: false };
  }
  return { ...request, body: Buffer.alloc(0), chunked: false };
}

/** A chunked body's content, or why it is not one (whole). */
function dechunk(data: Buffer): Buffer | string {
  const chunks: Buffer[] = [];
  let offset = 0;
  const nextLine = (): string | undefined => {
    const end = data.indexOf('\r\n', offset);
    if (end === -1) return undefined;
    const line = data.subarray(offset, end).toString('latin1');
    offset = end + 2;
    return line;
  };
  for (;;) {
    const line = nextLine();
    if (line === undefined) return 'its chunked body is cut short';
    const size = /^([0-9A-Fa-f]+)(?:[ \t]*;[^\r\n]*)?$/.exec(line)?.[1];
    if (size === undefined) return `its chunk size line ${JSON.stringify(line)} is not one`;
    const length = parseInt(size, 16);
    if (length === 0) break;
    if (data.length < offset + length + 2) return 'its chunked body is cut short';
    if (data.subarray(offset + length, offset + length + 2).toString('latin1') !== '\r\n') {
      return 'a chunk of its body is longer than its size says';
    }
    chunks.push(data.subarray(offset, offset + length));
    offset += length + 2;
  }
  for (;;) {
    const line = nextLine();
    if (line === undefined) return 'its chunked body is cut short';
    if (line === '') return Buffer.concat(chunks);
    const colon = line.indexOf(':');
    if (!TOKEN.test(colon === -1 ? '' : line.slice(0, colon))) {
      return `its trailer line ${JSON.stringify(line)} is not one`;
    }
  }
}
