import { ExpectedError } from '../expected-error';

/** An error the HTTP layer answers as it is: its status, a message for people, and extra headers. */
export class HttpProblem extends ExpectedError {
  constructor(
    readonly status: number,
    message: string,
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(message);
    this.name = 'HttpProblem';
  }
}

/** The Retry-After of a 503 that passes soon: the store coming back, or another instance serving. */
export const RETRY_SOON: Readonly<Record<string, string>> = { 'Retry-After': '1' };

/** The end of the validator's message for a query parameter an operation does not declare. */
export const UNKNOWN_QUERY_PARAMETER = 'is not allowed: the query parameter is unknown';

/** The path id's field, as the validator names it; its problems read the same wherever found. */
export const PATH_ID = 'request/params/id';
