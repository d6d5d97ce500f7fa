import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RequestHandler, Response } from 'express';
import getRawBody from 'raw-body';
import { HttpProblem } from './http-error';
import { JsonSyntaxError, parseJson, type ParsedJson } from './lossless-json';
import { routedOperation } from './route-gate';

/** The lossless parse of the request body, for reading exact numbers; set by the JSON body reader. */
export function parsedBody(res: Response): ParsedJson | undefined {
  return res.locals['parsedBody'] as ParsedJson | undefined;
}

const NOT_JSON = 'The request body must be application/json in UTF-8.';

/**
 * The Content-Type the validator sees once this reader has accepted one; an operation that takes no
 * body is handed none. express-openapi-validator parses the header with a regex whose time grows
 * with the square of its semicolons (16,000 took 350 to 460 ms a request), and builds and keeps
 * validators for each distinct value it sees (about 11 KB each, never freed): handed the client's
 * header, any request could cost a core a third of a second, or grow the process without bound, no
 * token needed on `/healthz`.
 */
const ACCEPTED_MEDIA_TYPE = 'application/json';
const REQUIRED = 'A JSON request body is required.';
const INCOMPLETE = 'The request body did not arrive whole.';
const utf8 = new TextDecoder('utf-8', { fatal: true });

function checkMediaType(header: string | undefined, hasContent: boolean): void {
  if (header === undefined) {
    throw hasContent ? new HttpProblem(415, NOT_JSON) : new HttpProblem(400, REQUIRED);
  }
  const [type = '', ...parameters] = header.split(';');
  if (type.trim().toLowerCase() !== 'application/json') throw new HttpProblem(415, NOT_JSON);
  for (const parameter of parameters) {
    const [name = '', value = ''] = parameter
      .split('=', 2)
      .map((part) => part.trim().toLowerCase());
    if (name === 'charset' && value.replace(/^"(.*)"$/, '$1') !== 'utf-8') {
      throw new HttpProblem(415, NOT_JSON);
    }
  }
}

function decodeUtf8(body: Buffer): string {
  try {
    return utf8.decode(body);
  } catch {
    throw new HttpProblem(400, 'The request body is not valid UTF-8.');
  }
}

/** Whether the request announces a body: chunked, or a Content-Length other than 0. */
export function announcesBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/** Requests whose client waits for 100 (Continue) before it sends its body; see awaitContinue. */
const awaitingContinue = new WeakSet<IncomingMessage>();

/**
 * Notes a request whose client waits for 100 (Continue) before it sends its body (node:http's
 * 'checkContinue', see createHttpServer): the body reader sends the 100 once the request has
 * passed the checks made before its body, just before it reads it.
 */
export function awaitContinue(req: IncomingMessage): void {
  awaitingContinue.add(req);
}

/** Sends 100 (Continue) to a client that waits for it, now that its body is about to be read. */
function continueIfAwaited(req: IncomingMessage, res: ServerResponse): void {
  if (awaitingContinue.delete(req)) res.writeContinue();
}

/** Methods that change nothing: their answer never waits for a body sent with them. */
const SAFE_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD']);

/**
 * Reads and drops the body of a request whose operation takes none, then calls `next`; past
 * `limit` bytes, `next` gets a 413 instead, as a body that is read would.
 */
function discardBody(
  req: IncomingMessage,
  res: ServerResponse,
  limit: number,
  tooLarge: string,
  next: (error?: unknown) => void,
): void {
  if (req.complete) {
    next();
    return;
  }
  if (Number(req.headers['content-length'] ?? 0) > limit) {
    next(new HttpProblem(413, tooLarge));
    return;
  }
  continueIfAwaited(req, res);
  let received = 0;
  const count = (chunk: Buffer) => {
    received += chunk.length;
    if (received <= limit) return;
    stop();
    next(new HttpProblem(413, tooLarge));
  };
  const end = () => {
    stop();
    next();
  };
  const stop = () => {
    req.off('data', count);
    req.off('end', end);
  };
  req.on('data', count);
  req.once('end', end);
}

/**
 * Reads the body of operations that take one, after authentication: transfer coding and media
 * type (415), then size (413), then UTF-8 and strict JSON (400: duplicate keys, unpaired
 * surrogates, over-deep nesting). An operation that takes none ignores a body sent with it. A GET
 * or HEAD, which changes nothing, is answered at once, and the server reads at most a little of
 * the body after the answer (see limitUnreadBody in unread-body.ts). A DELETE runs only once that body
 * has arrived whole: a body whose framing breaks is answered 400 by the server
 * (src/http/client-errors.ts), and that answer must not follow a deletion. Its body is discarded
 * as it comes, never held, up to the same limit as a body that is read (413 past it), and
 * REQUEST_TIMEOUT_MS bounds how long it may take: a body announced and never sent gets the
 * server's 408.
 */
export function createJsonBody({ limit }: { limit: number }): RequestHandler {
  const tooLarge = `The request body is larger than ${limit} bytes.`;
  return (req, res, next) => {
    const operation = routedOperation(res);
    if (operation?.hasRequestBody !== true) {
      // No body is read, so its media type means nothing; see ACCEPTED_MEDIA_TYPE. Deleted only
      // when sent: a delete turns the headers object into a slower dictionary for later reads.
      if (req.headers['content-type'] !== undefined) delete req.headers['content-type'];
      if (operation !== undefined && !SAFE_METHODS.has(req.method) && announcesBody(req)) {
        discardBody(req, res, limit, tooLarge, next);
        return;
      }
      next();
      return;
    }
    const length = req.headers['content-length'];
    const transferCoding = req.headers['transfer-encoding'];
    const chunked = transferCoding !== undefined;
    // node:http reads `gzip, chunked` as chunked and hands on the still-coded bytes. RFC 9112
    // section 6.1 suggests 501, but a refusal of what the client sent is a 4xx here, as for a
    // Content-Encoding.
    if (chunked && transferCoding.trim().toLowerCase() !== 'chunked') {
      throw new HttpProblem(415, 'The request body must not have a transfer coding but chunked.');
    }
    const hasContent = announcesBody(req);
    checkMediaType(req.headers['content-type'], hasContent);
    if (req.headers['content-type'] !== undefined) {
      req.headers['content-type'] = ACCEPTED_MEDIA_TYPE;
    }
    const encoding = req.headers['content-encoding']?.trim().toLowerCase();
    if (encoding !== undefined && encoding !== 'identity') {
      throw new HttpProblem(415, 'The request body must not have a Content-Encoding.');
    }
    if (length !== undefined && Number(length) > limit) throw new HttpProblem(413, tooLarge);
    if (!hasContent) throw new HttpProblem(400, REQUIRED);
    // The connection closed before the body was read (the client left while a step before this one
    // awaited its store, or the server answered a broken framing itself): nobody is left to answer,
    // and raw-body would call the request an internal error, logged as one.
    if (!req.readable) throw new HttpProblem(400, INCOMPLETE);
    continueIfAwaited(req, res);
    // raw-body, not Express's body reader: past the limit, that one reads the rest of the body to
    // its end before answering 413 (a chunked body of a million one-byte chunks took 2 s of CPU).
    // Here the 413 is answered at once, and the request, which raw-body leaves paused, flows again
    // so that limitUnreadBody (unread-body.ts) reads at most a little more of the connection.
    getRawBody(req, { limit, length: chunked ? null : (length ?? null) }, (error, raw) => {
      if (error) {
        if (error.status === 413) {
          req.resume();
          next(new HttpProblem(413, tooLarge));
        } else next(error);
        return;
      }
      try {
        const body = decodeUtf8(raw);
        if (body.trim() === '') throw new HttpProblem(400, REQUIRED);
        const parsed = parseJson(body);
        req.body = parsed.value;
        res.locals['parsedBody'] = parsed;
        next();
      } catch (cause) {
        next(
          cause instanceof JsonSyntaxError
            ? new HttpProblem(400, `The request body is not valid JSON: ${cause.message}.`)
            : cause,
        );
      }
    });
  };
}
