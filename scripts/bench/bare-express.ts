/**
 * Configuration (2), the framework's limit: bare Express 5 with express.json(), answering the same
 * small JSON as bare-http.ts. Listens on HOST:PORT like the service.
 *
 * With BARE_EXPRESS_BORN_PROTOTYPES=1, configuration (2b): the same app on a server whose requests
 * and responses are born with the app's prototypes, as the service's are (expressMessageClasses),
 * so that Express's per-request Object.setPrototypeOf changes nothing. Informational: it shows
 * what that one change is worth to Express itself.
 */
import http from 'node:http';
import express from 'express';
import { expressMessageClasses } from '../../src/http/message-shape';

const app = express();
app.use(express.json());
app.post('/plants', (req, res) => {
  const body = req.body as Record<string, unknown>;
  res.json({ name: body['name'], tag: body['tag'] });
});
app.get('/healthz', (_req, res) => {
  res.json({ status: 'ok' });
});

const server =
  process.env['BARE_EXPRESS_BORN_PROTOTYPES'] === '1'
    ? http.createServer(expressMessageClasses(app), app)
    : http.createServer(app);
server.listen(Number(process.env['PORT'] ?? 8080), process.env['HOST'] ?? '127.0.0.1');
process.once('SIGTERM', () => {
  server.close(() => process.exit(0));
  server.closeIdleConnections();
});
