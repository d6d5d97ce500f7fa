/** An error the HTTP layer answers as it is: its status, a message for people, and extra headers. */
export class HttpProblem extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    // An expected answer, not a fault: its stack would never be read, and capturing it costs
    // more than much of the request.
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(message);
    Error.stackTraceLimit = limit;
    this.name = 'HttpProblem';
  }
}

/** The end of the validator's message for a query parameter an operation does not declare. */
export const UNKNOWN_QUERY_PARAMETER = 'is not allowed: the query parameter is unknown';

/** The path id's field, as the validator names it; its problems read the same wherever found. */
export const PATH_ID = 'request/params/id';
