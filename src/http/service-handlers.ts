import type { RequestHandler } from 'express';
import { StoreUnavailableError } from '../store/plant-store';
import { HttpProblem, RETRY_SOON } from './http-error';
import type { OpenApiDocument } from './openapi-document';
import type { Json, OperationId } from './openapi-types';

/** What the readiness probe asks: is the store answering, and is this instance going away. */
export interface Readiness {
  /** Resolves when the store answers a trivial query. */
  checkStore(): Promise<void>;
  isShuttingDown(): boolean;
}

/**
 * `check`, with the calls made while one is in flight sharing it: a burst of probes costs the store
 * one query, not one each. Over PostgreSQL each query takes a connection of the pool, and 5,000
 * probes pipelined on one connection queued 5,000 of them ahead of the requests' own statements.
 */
function sharedWhileInFlight(check: () => Promise<void>): () => Promise<void> {
  let inFlight: Promise<void> | undefined;
  return () =>
    (inFlight ??= check().finally(() => {
      inFlight = undefined;
    }));
}

/** Handlers of the unauthenticated operations: the probes and the published contract. */
export function createServiceHandlers(
  document: OpenApiDocument,
  readiness: Readiness,
): Readonly<
  Record<
    Extract<OperationId, 'getHealth' | 'getReadiness' | 'getOpenApiYaml' | 'getOpenApiJson'>,
    RequestHandler
  >
> {
  const checkStore = sharedWhileInFlight(() => readiness.checkStore());
  return {
    async getReadiness(_req, res) {
      if (readiness.isShuttingDown())
        throw new HttpProblem(503, 'The service is shutting down.', RETRY_SOON);
      try {
        await checkStore();
      } catch (error) {
        // Answered by the error handler's one mapping for an unavailable store: 503, Retry-After.
        throw error instanceof StoreUnavailableError
          ? error
          : new StoreUnavailableError({ cause: error });
      }
      res.json({ status: 'ready' } satisfies Json<'getReadiness', 200>);
    },
    getHealth(_req, res) {
      res.json({ status: 'ok' } satisfies Json<'getHealth', 200>);
    },
    getOpenApiYaml(_req, res) {
      res.type('application/yaml').send(document.yaml);
    },
    getOpenApiJson(_req, res) {
      res.type('application/json').send(document.json);
    },
  };
}
