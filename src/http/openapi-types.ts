import type { RequestHandler } from 'express';
import type { operations } from '../../generated/openapi';

/** Every operationId of the contract. */
export type OperationId = keyof operations;

/** One handler per operationId; `satisfies OperationHandlers` makes a missing one a compile error. */
export type OperationHandlers = Readonly<Record<OperationId, RequestHandler>>;

/** The JSON request body of an operation. */
export type Body<Op extends OperationId> = operations[Op] extends {
  requestBody: { content: { 'application/json': infer B } };
}
  ? B
  : never;

/** The JSON response body of an operation for one status. */
export type Json<
  Op extends OperationId,
  Status extends number,
> = operations[Op]['responses'] extends {
  [S in Status]: { content: { 'application/json': infer B } };
}
  ? B
  : never;
