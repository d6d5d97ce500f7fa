import type { RequestHandler } from 'express';
import { serverAnsweredOn } from './client-errors';
import type { RouteInfo } from './openapi-document';
import type { OperationHandlers, OperationId } from './openapi-types';
import { routedOperation } from './route-gate';

/**
 * Calls the handler of the operation the route gate chose; throws at start when one is missing.
 * No second path match: the gate already matched the path and method and kept the raw path
 * parameters (`pathParameter`).
 */
export function createOperationsRouter(
  routes: readonly RouteInfo[],
  handlers: OperationHandlers,
): RequestHandler {
  const byOperation = new Map<string, RequestHandler>();
  for (const route of routes) {
    for (const operation of route.operations.values()) {
      const handler = handlers[operation.operationId as OperationId];
      if (handler === undefined) {
        throw new Error(`No handler for the operation ${operation.operationId}.`);
      }
      byOperation.set(operation.operationId, handler);
    }
  }
  return (req, res, next) => {
    // The server answered this request itself (its body came too late: a 408) before it came
    // whole: its client was told that it failed, and it changes nothing.
    if (serverAnsweredOn(req.socket)) return;
    const operation = routedOperation(res);
    // Fail closed: a request the validator did not check against this very operation never
    // reaches a handler.
    const validated = (req as { openapi?: { schema?: { operationId?: unknown } } }).openapi;
    if (operation === undefined || validated?.schema?.operationId !== operation.operationId) {
      throw new Error(`The request to ${req.method} ${req.path} was not validated.`);
    }
    return byOperation.get(operation.operationId)!(req, res, next);
  };
}
