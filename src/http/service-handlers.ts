import type { RequestHandler } from 'express';
import { StoreUnavailableError } from '../store/plant-store';
import type { OpenApiDocument } from './openapi-document';
import type { Json, OperationId } from './openapi-types';

/** Handlers of the unauthenticated operations: the probes and the published contract. */
export function createServiceHandlers(
  document: OpenApiDocument,
  checkReady: () => Promise<void>,
): Readonly<
  Record<
    Extract<OperationId, 'getHealth' | 'getReadiness' | 'getOpenApiYaml' | 'getOpenApiJson'>,
    RequestHandler
  >
> {
  return {
    async getReadiness(_req, res) {
      try {
        await checkReady();
      } catch (error) {
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
