import { ExpectedError } from '../expected-error';

/** Codes of the failures the service reports; the HTTP layer maps each to a status. */
export type DomainErrorCode = 'conflict' | 'not_found';

/** A failure of a business rule, with a stable code and a message for people. */
export class DomainError extends ExpectedError {
  constructor(
    readonly code: DomainErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'DomainError';
  }
}
