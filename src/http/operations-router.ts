import express, { type Router } from 'express';
import type { RouteInfo } from './openapi-document';
import type { OperationHandlers, OperationId } from './openapi-types';

/** `/plants/{id}` → `/plants/:id`. */
function toExpressPath(template: string): string {
  return template.replace(/\{([^}/]+)\}/g, ':$1');
}

/** Mounts each operation's handler at the contract's path and method; throws at start when one is missing. */
export function createOperationsRouter(
  routes: readonly RouteInfo[],
  handlers: OperationHandlers,
): Router {
  const router = express.Router({ caseSensitive: true, strict: true });
  for (const route of routes) {
    for (const [method, operation] of route.operations) {
      const handler = handlers[operation.operationId as OperationId];
      if (handler === undefined) {
        throw new Error(`No handler for the operation ${operation.operationId}.`);
      }
      router[method.toLowerCase() as 'get' | 'post' | 'delete'](
        toExpressPath(route.template),
        (req, res, next) => {
          // Fail closed: a request the validator did not match never reaches a handler unchecked.
          if ((req as { openapi?: unknown }).openapi === undefined) {
            throw new Error(`The request to ${operation.operationId} was not validated.`);
          }
          return handler(req, res, next);
        },
      );
    }
  }
  return router;
}
