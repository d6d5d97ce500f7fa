/**
 * Configuration (2), the framework's limit: bare Express 5 with express.json(), answering the same
 * small JSON as bare-http.ts. Listens on HOST:PORT like the service.
 */
import express from 'express';

const app = express();
app.use(express.json());
app.post('/plants', (req, res) => {
  const body = req.body as Record<string, unknown>;
  res.json({ name: body['name'], tag: body['tag'] });
});
app.get('/healthz', (_req, res) => {
  res.json({ status: 'ok' });
});

const server = app.listen(Number(process.env['PORT'] ?? 8080), process.env['HOST'] ?? '127.0.0.1');
process.once('SIGTERM', () => {
  server.close(() => process.exit(0));
  server.closeIdleConnections();
});
