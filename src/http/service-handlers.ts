import type { RequestHandler } from 'express';
import type { OpenApiDocument } from './openapi-document';
import type { Json, OperationId } from './openapi-types';

/** Handlers of the unauthenticated operations: the liveness probe and the published contract. */
export function createServiceHandlers(
  document: OpenApiDocument,
): Readonly<
  Record<Extract<OperationId, 'getHealth' | 'getOpenApiYaml' | 'getOpenApiJson'>, RequestHandler>
> {
  return {
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
