/** Codes of the failures the service reports; the HTTP layer maps each to a status. */
export type DomainErrorCode = 'conflict' | 'not_found';

/** A failure of a business rule, with a stable code and a message for people. */
export class DomainError extends Error {
  constructor(
    readonly code: DomainErrorCode,
    message: string,
  ) {
    // An expected answer, not a fault: its stack would never be read, and capturing it costs
    // more than much of the request.
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(message);
    Error.stackTraceLimit = limit;
    this.name = 'DomainError';
  }
}
