/**
 * Configuration (1), the platform's limit: bare node:http that reads the body, JSON.parses it and
 * answers a small JSON. Listens on HOST:PORT like the service; any GET answers {"status":"ok"}.
 */
import http from 'node:http';

const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    let status = 200;
    let reply = '{"status":"ok"}';
    if (req.method === 'POST') {
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
        reply = JSON.stringify({ name: body['name'], tag: body['tag'] });
      } catch {
        status = 400;
        reply = '{"error":400}';
      }
    }
    res.writeHead(status, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(reply),
    });
    res.end(reply);
  });
});

server.listen(Number(process.env['PORT'] ?? 8080), process.env['HOST'] ?? '127.0.0.1');
process.once('SIGTERM', () => {
  server.close(() => process.exit(0));
  server.closeIdleConnections();
});
