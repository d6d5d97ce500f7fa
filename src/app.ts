import express, { type Express, type RequestHandler } from 'express';
import { createBearerAuth } from './http/bearer-auth';
import { createDocsHandlers } from './http/docs-handlers';
import { createErrorHandler } from './http/error-handler';
import { createJsonBody } from './http/json-body';
import { presetMessageFields } from './http/message-shape';
import type { OpenApiDocument } from './http/openapi-document';
import { createOperationsRouter } from './http/operations-router';
import { pipeline } from './http/pipeline';
import { createPlantsHandlers } from './http/plants-handlers';
import {
  authFailureLimit,
  corsFor,
  responseHeaders,
  tokenRequestLimit,
  type RateLimits,
} from './http/protections';
import { createRequestLog } from './http/request-log';
import {
  checkRequestTarget,
  createRouteGate,
  methodNotAllowed,
  refuseUndeclaredQuery,
} from './http/route-gate';
import { createValidator } from './http/validator';
import { createServiceHandlers, type Readiness } from './http/service-handlers';
import type { Logger } from './logger';
import type { Metrics } from './metrics';
import type { PlantsService } from './service/plants-service';
import type { TokensService } from './service/tokens-service';

export interface AppDeps {
  readonly document: OpenApiDocument;
  readonly plants: PlantsService;
  readonly tokens: Pick<TokensService, 'verify'>;
  readonly readiness: Readiness;
  readonly logger: Logger;
  readonly bodyLimitBytes: number;
  /** Checks every JSON response against the contract (on in tests; costs time in production). */
  readonly validateResponses: boolean;
  /** Serves GET /metrics and counts requests when given. */
  readonly metrics?: Metrics | undefined;
  readonly corsOrigins: readonly string[];
  readonly trustProxyHops: number;
  readonly limits: RateLimits;
}

/** GET (and HEAD) /metrics: outside the contract, for Prometheus on the same network; 405 to other methods. */
function metricsEndpoint(handler: RequestHandler): RequestHandler {
  return (req, res, next) => {
    if (req.path !== '/metrics') return next();
    checkRequestTarget(req);
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      throw methodNotAllowed(req.method, '/metrics', 'GET, HEAD');
    }
    return handler(req, res, next);
  };
}

/**
 * Assembles the service in the contract's order of checks: route (404/405), authentication
 * (429/401), media type and size (415/413), body and parameters (400), then the handlers. It does
 * not listen.
 */
export function createApp(deps: AppDeps): Express {
  const app = express();
  app.disable('x-powered-by');
  app.disable('etag');
  app.set('case sensitive routing', true);
  app.set('strict routing', true);
  app.set('trust proxy', deps.trustProxyHops);
  presetMessageFields(app);
  const { limits } = deps;
  const authFailures = authFailureLimit({
    limit: limits.authFailures,
    windowMs: limits.authFailureWindowMs,
  });

  const { metrics } = deps;
  const cors = corsFor(deps.corsOrigins);
  const tokenLimit = tokenRequestLimit({
    limit: limits.tokenRequests,
    windowMs: limits.tokenWindowMs,
  });
  app.use(
    pipeline([
      createRequestLog(deps.logger, metrics?.record),
      responseHeaders(() => deps.readiness.isShuttingDown()),
      metrics === undefined ? undefined : metricsEndpoint(metrics.handler),
      cors?.headers,
      createRouteGate(deps.document.routes, cors),
      authFailures.around(createBearerAuth((secret) => deps.tokens.verify(secret))),
      tokenLimit,
      createJsonBody({ limit: deps.bodyLimitBytes }),
      refuseUndeclaredQuery,
      ...createValidator(deps.document, deps.validateResponses),
      createOperationsRouter(deps.document.routes, {
        ...createPlantsHandlers(deps.plants),
        ...createServiceHandlers(deps.document, deps.readiness),
        ...createDocsHandlers(),
      }),
    ]),
  );
  app.use(createErrorHandler(deps.logger));
  return app;
}
