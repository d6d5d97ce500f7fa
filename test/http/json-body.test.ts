import { once } from 'node:events';
import net, { type AddressInfo } from 'node:net';
import express from 'express';
import request from 'supertest';
import { createJsonBody } from '../../src/http/json-body';
import type { OperationInfo } from '../../src/http/openapi-document';

/** The body reader behind a stand-in route gate, answering the Content-Type it left for the validator. */
function appWith(operation: OperationInfo): express.Express {
  const app = express();
  app.use((_req, res, next) => {
    res.locals['operation'] = operation;
    next();
  });
  app.use(createJsonBody({ limit: 1024 }));
  app.use((req, res) => {
    res.json({ contentType: req.headers['content-type'] ?? null });
  });
  return app;
}

const create: OperationInfo = {
  operationId: 'createPlant',
  secured: true,
  hasRequestBody: true,
  takesQuery: false,
};
const health: OperationInfo = {
  operationId: 'health',
  secured: false,
  hasRequestBody: false,
  takesQuery: false,
};

// The validator keeps compiled validators per distinct Content-Type and parses it with a regex
// that is slow on many semicolons: it must only ever see the one the body reader accepted.
describe('the Content-Type the body reader hands on', () => {
  it.each([
    ['application/json', 'application/json'],
    ['a charset in capitals and quotes', 'Application/JSON; charset="UTF-8"'],
    ['another parameter', 'application/json; v=12345'],
    ['4,000 semicolons', `application/json${';'.repeat(4000)}`],
  ])('is application/json after accepting %s', async (_, type) => {
    const res = await request(appWith(create))
      .post('/plants')
      .set('Content-Type', type)
      .send('{"id": 1, "name": "a"}');
    expect(res.status).toBe(200);
    expect(res.body).toStrictEqual({ contentType: 'application/json' });
  });

  it.each([
    ['another type', 'x/1'],
    ['a parameter', 'text/plain; v=2'],
    ['4,000 semicolons', `a/b${';'.repeat(4000)}`],
  ])('is none for an operation without a body, whatever was sent (%s)', async (_, type) => {
    const res = await request(appWith(health)).get('/healthz').set('Content-Type', type);
    expect(res.status).toBe(200);
    expect(res.body).toStrictEqual({ contentType: null });
  });
});

// Over PostgreSQL authentication waits for the store, and a client can leave meanwhile.
describe('a body whose connection closed before it was read', () => {
  it('is refused with a 400, not passed on as an internal error of the reader', async () => {
    const app = express();
    let reached: (outcome: unknown) => void = () => undefined;
    const outcome = new Promise<unknown>((resolve) => (reached = resolve));
    app.use((req, res, next) => {
      res.locals['operation'] = create;
      // A slow step before the body reader, such as an authentication that awaits its store.
      req.once('close', () => next());
    });
    app.use(createJsonBody({ limit: 1024 }));
    app.use(() => reached('read'));
    app.use(((error, _req, _res, _next) => reached(error)) as express.ErrorRequestHandler);
    const server = app.listen(0, '127.0.0.1');
    await once(server, 'listening');
    try {
      const socket = net.connect((server.address() as AddressInfo).port, '127.0.0.1');
      await once(socket, 'connect');
      socket.write(
        'POST /plants HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n' +
          'Content-Length: 40\r\n\r\n{"id":',
      );
      await new Promise((resolve) => setTimeout(resolve, 50));
      socket.destroy();

      expect(await outcome).toMatchObject({
        status: 400,
        message: 'The request body did not arrive whole.',
      });
    } finally {
      server.close();
    }
  });
});
