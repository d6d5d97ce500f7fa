import path from 'node:path';
import { createApp } from './app';
import { ConfigError, parseConfig } from './config';
import { loadOpenApiDocument } from './http/openapi-document';
import { createJsonLogger, type Logger } from './logger';
import { createPlantsService } from './service/plants-service';
import { createTokensService, type TokensService } from './service/tokens-service';
import { openStore } from './store/open-store';

/** The contract ships at the project root, two levels above dist/src/. */
const SPEC_PATH = path.resolve(__dirname, '..', '..', 'openapi.yaml');

/** With no token at all, development gets one printed once; production refuses to start. */
async function ensureToken(
  tokens: TokensService,
  production: boolean,
  baseUrl: string,
  logger: Logger,
): Promise<boolean> {
  if ((await tokens.countActive()) > 0) return true;
  if (production) {
    logger.error(
      'No API token exists, so no request could be served. Create one with `npm run token -- create --name NAME` and start again.',
    );
    return false;
  }
  const token = await tokens.issue('development');
  process.stdout.write(
    [
      '',
      `Created a development token (shown once, stored only as a hash): ${token.secret}`,
      'Try it:',
      `  curl -i -X POST ${baseUrl}/plants -H 'Authorization: Bearer ${token.secret}' \\`,
      `    -H 'Content-Type: application/json' -d '{"id": 1, "name": "Monstera deliciosa", "tag": "tropical"}'`,
      '',
    ].join('\n') + '\n',
  );
  return true;
}

async function main(): Promise<number> {
  const logger = createJsonLogger(process.stdout);
  let config;
  try {
    config = parseConfig(process.env);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    process.stderr.write(`${error.message}\n`);
    return 1;
  }
  const store = await openStore(config);
  const tokens = createTokensService({ store });
  const baseUrl = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${config.port}`;
  if (!(await ensureToken(tokens, config.production, baseUrl, logger))) {
    await store.close();
    return 1;
  }
  const app = createApp({
    document: loadOpenApiDocument(SPEC_PATH),
    plants: createPlantsService({ store }),
    tokens,
    logger,
    bodyLimitBytes: config.bodyLimitBytes,
    validateResponses: config.validateResponses,
  });
  const server = app.listen(config.port, config.host);
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve).once('error', reject);
  });
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : config.port;
  logger.info('listening', {
    url: `http://${config.host}:${port}`,
    store: 'sqlite',
    path: config.sqlite.path,
  });

  return new Promise<number>((resolve) => {
    const stop = (signal: string) => {
      logger.info('stopping', { signal });
      server.close(() => {
        store.close().then(
          () => resolve(0),
          () => resolve(1),
        );
      });
      server.closeIdleConnections();
    };
    process.once('SIGTERM', stop).once('SIGINT', stop);
  });
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(
      `The plant store failed to start: ${error instanceof Error ? error.message : String(error)}\n`,
    );
    process.exit(1);
  },
);
