import express, { type Express } from 'express';
import * as OpenApiValidator from 'express-openapi-validator';
import { createBearerAuth } from './http/bearer-auth';
import { createDocsHandlers } from './http/docs-handlers';
import { createErrorHandler } from './http/error-handler';
import { HttpProblem } from './http/http-error';
import { createJsonBody } from './http/json-body';
import type { OpenApiDocument } from './http/openapi-document';
import { createOperationsRouter } from './http/operations-router';
import { createPlantsHandlers } from './http/plants-handlers';
import { authFailureLimit, corsFor, securityHeaders, tokenRequestLimit } from './http/protections';
import { createRequestLog } from './http/request-log';
import { createRouteGate } from './http/route-gate';
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
  readonly limits: {
    readonly authFailures: number;
    readonly authFailureWindowMs: number;
    readonly tokenRequests: number;
    readonly tokenWindowMs: number;
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
  const { limits } = deps;
  const authFailures = authFailureLimit({
    limit: limits.authFailures,
    windowMs: limits.authFailureWindowMs,
  });

  app.use(createRequestLog(deps.logger));
  app.use(securityHeaders());
  app.use((_req, res, next) => {
    // While draining, keep-alive clients are told to reconnect (to another instance).
    if (deps.readiness.isShuttingDown()) res.setHeader('Connection', 'close');
    next();
  });
  if (deps.metrics !== undefined) {
    app.use(deps.metrics.middleware);
    app.get('/metrics', deps.metrics.handler);
  }
  const cors = corsFor(deps.corsOrigins);
  if (cors !== undefined) app.use(cors);
  app.use((req, _res, next) => {
    if (req.httpVersion === '1.1' && req.headers.host === undefined) {
      throw new HttpProblem(400, 'An HTTP/1.1 request needs a Host header.');
    }
    if (req.url.includes('#')) {
      throw new HttpProblem(400, 'A request target must not contain a fragment (#).');
    }
    next();
  });
  app.use(createRouteGate(deps.document.routes));
  app.use(authFailures.guard);
  app.use(createBearerAuth((secret) => deps.tokens.verify(secret)));
  app.use(authFailures.record);
  const tokenLimit = tokenRequestLimit({
    limit: limits.tokenRequests,
    windowMs: limits.tokenWindowMs,
  });
  if (tokenLimit !== undefined) app.use(tokenLimit);
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
      ...createServiceHandlers(deps.document, deps.readiness),
      ...createDocsHandlers(),
    }),
  );
  app.use(createErrorHandler(deps.logger));
  return app;
}
