import express, { type Express } from 'express';
import * as OpenApiValidator from 'express-openapi-validator';
import { createBearerAuth } from './http/bearer-auth';
import { createErrorHandler } from './http/error-handler';
import { createJsonBody } from './http/json-body';
import type { OpenApiDocument } from './http/openapi-document';
import { createOperationsRouter } from './http/operations-router';
import { createPlantsHandlers } from './http/plants-handlers';
import { createRouteGate } from './http/route-gate';
import { createServiceHandlers } from './http/service-handlers';
import type { Logger } from './logger';
import type { PlantsService } from './service/plants-service';
import type { TokensService } from './service/tokens-service';

export interface AppDeps {
  readonly document: OpenApiDocument;
  readonly plants: PlantsService;
  readonly tokens: Pick<TokensService, 'verify'>;
  /** Resolves when the store answers; the readiness probe. */
  readonly checkReady: () => Promise<void>;
  readonly logger: Logger;
  readonly bodyLimitBytes: number;
  /** Checks every JSON response against the contract (on in tests; costs time in production). */
  readonly validateResponses: boolean;
}

/**
 * Assembles the service in the contract's order of checks: route (404/405), authentication (401),
 * media type and size (415/413), body and parameters (400), then the handlers. It does not listen.
 */
export function createApp(deps: AppDeps): Express {
  const app = express();
  app.disable('x-powered-by');
  app.disable('etag');
  app.set('case sensitive routing', true);
  app.set('strict routing', true);

  app.use((_req, res, next) => {
    res.set('X-Content-Type-Options', 'nosniff');
    next();
  });
  app.use(createRouteGate(deps.document.routes));
  app.use(createBearerAuth((secret) => deps.tokens.verify(secret)));
  app.use(createJsonBody({ limit: deps.bodyLimitBytes }));
  app.use(
    OpenApiValidator.middleware({
      apiSpec: structuredClone(deps.document.spec) as never,
      validateRequests: { allowUnknownQueryParameters: false, coerceTypes: false },
      validateResponses: deps.validateResponses,
      // Authentication is passport's job, before the body is read; the validator checks shapes only.
      validateSecurity: false,
      // The route gate has already answered 404/405; HEAD of a GET operation is not in the contract's paths.
      ignoreUndocumented: true,
    }),
  );
  app.use(
    createOperationsRouter(deps.document.routes, {
      ...createPlantsHandlers(deps.plants),
      ...createServiceHandlers(deps.document, deps.checkReady),
    }),
  );
  app.use(createErrorHandler(deps.logger));
  return app;
}
