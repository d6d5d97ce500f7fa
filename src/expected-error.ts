/**
 * An error the service expects and answers (a refused request, a broken business rule), not a
 * fault: its stack would never be read, and capturing one costs more than much of a request, so
 * none is captured.
 */
export class ExpectedError extends Error {
  constructor(message: string) {
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(message);
    Error.stackTraceLimit = limit;
  }
}
