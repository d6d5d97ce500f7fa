import type { ErrorRequestHandler } from 'express';
// The validator's base error class is not re-exported from its index.
import { HttpError as ValidatorError } from 'express-openapi-validator/dist/framework/types';
import type { Logger } from '../logger';
import { DomainError, type DomainErrorCode } from '../service/errors';
import { StoreUnavailableError } from '../store/plant-store';
import { HttpProblem, PATH_ID, RETRY_SOON, UNKNOWN_QUERY_PARAMETER } from './http-error';
import { CANONICAL_INT64_RULE } from './int64';
import { requestIdOf, requestLineOf } from './request-log';
import type { Json } from './openapi-types';

const DOMAIN_STATUS: Readonly<Record<DomainErrorCode, number>> = { conflict: 409, not_found: 404 };

interface ValidatorItem {
  path?: string;
  message?: string;
}

/** ajv's wording, where it does not read well after a field name. */
const REWORDED: ReadonlyArray<readonly [RegExp, string]> = [
  [/^must have required property .*$/, 'is required'],
  [
    /^must NOT have (unevaluated|additional) properties$/,
    'is not allowed: the property is unknown',
  ],
  [/^Unknown query parameter .*$/, UNKNOWN_QUERY_PARAMETER],
  [/^must match pattern "\^\[\^\\x00\]\*\$"$/, 'must not contain the character U+0000'],
  // The validator's own message for a path it cannot percent-decode, stray quote included.
  [/^malformed uri'$/, 'is not a valid URI path: its percent-encoding is malformed or not UTF-8'],
];

/**
 * Fields whose every problem is told by one rule. The path id is checked twice: by the validator
 * as an integer (`abc`, `1.5`), then by the handler as a canonical int64 (`01`, `+1`, out of
 * range); both answers read the same.
 */
const FIELD_RULES: ReadonlyMap<string, string> = new Map([[PATH_ID, CANONICAL_INT64_RULE]]);

/** One line per validation problem, each naming its field, as `request/body/name must be string`. */
function describeValidation(error: { message: string; errors: ValidatorItem[] }): string {
  const items = error.errors.map((item) => {
    const field = `request${item.path ?? ''}`.replace(/\/$/, '');
    const message =
      FIELD_RULES.get(field) ??
      REWORDED.reduce(
        (text, [pattern, replacement]) => text.replace(pattern, replacement),
        item.message ?? 'is invalid',
      );
    return message.startsWith(field) ? message : `${field} ${message}`;
  });
  return items.length > 0 ? items.join('; ') : error.message;
}

interface Answer {
  status: number;
  message: string;
  headers?: Readonly<Record<string, string>>;
}

const UNAVAILABLE: Answer = {
  status: 503,
  message: 'The store is unavailable; try again shortly.',
  headers: RETRY_SOON,
};

function toAnswer(error: unknown): Answer | undefined {
  if (error instanceof HttpProblem) return error;
  if (error instanceof StoreUnavailableError) return UNAVAILABLE;
  if (error instanceof DomainError)
    return { status: DOMAIN_STATUS[error.code], message: error.message };
  if (error instanceof ValidatorError && error.status < 500) {
    return { status: error.status, message: describeValidation(error) };
  }
  // Errors of Express's own body reader (aborted or truncated uploads) carry a status and say whether
  // their message is safe to show.
  const { status, expose, message } = error as {
    status?: unknown;
    expose?: unknown;
    message?: unknown;
  };
  if (typeof status === 'number' && status >= 400 && status < 500 && expose === true) {
    return { status, message: typeof message === 'string' ? message : 'Bad request.' };
  }
  return undefined;
}

/** The one place that turns any error into a status and the contract's Error body; a 500 reveals nothing. */
export function createErrorHandler(logger: Logger): ErrorRequestHandler {
  return (error: unknown, req, res, next) => {
    if (res.headersSent) {
      next(error);
      return;
    }
    let answer = toAnswer(error);
    // Named as in the request line (request-log.ts), so that a search by req.path finds both.
    const context = { reqId: requestIdOf(res), req: requestLineOf(req) };
    if (answer === UNAVAILABLE) {
      logger.warn({ ...context, cause: String((error as Error).cause) }, 'store unavailable');
    }
    if (answer === undefined) {
      logger.error({ ...context, err: error }, 'request failed');
      answer = { status: 500, message: 'Internal server error.' };
    }
    const body: Json<'createPlant', 400> = { error: answer.status, message: answer.message };
    res
      .status(answer.status)
      .set(answer.headers ?? {})
      .json(body);
  };
}
