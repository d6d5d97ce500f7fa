import express, { type ErrorRequestHandler, type RequestHandler } from 'express';
import request from 'supertest';
import { pipeline } from '../../src/http/pipeline';

/** An app whose one pipeline runs `steps`; errors come back as 500 with their message, and `seen` lists what ran. */
function appWith(steps: (RequestHandler | undefined)[], seen: string[]) {
  const app = express();
  app.use(pipeline(steps));
  app.use((_req, res) => {
    seen.push('after');
    res.status(404).send('fell through');
  });
  const onError: ErrorRequestHandler = (error: unknown, _req, res, _next) => {
    seen.push('error handler');
    res.status(500).send(error instanceof Error ? error.message : `non-error: ${String(error)}`);
  };
  app.use(onError);
  return app;
}

const step =
  (name: string, seen: string[]): RequestHandler =>
  (_req, _res, next) => {
    seen.push(name);
    next();
  };

describe('pipeline', () => {
  it('runs the steps in order, skips absent ones, and goes on after the last', async () => {
    const seen: string[] = [];
    const res = await request(appWith([step('a', seen), undefined, step('b', seen)], seen)).get(
      '/',
    );
    expect(res.status).toBe(404);
    expect(seen).toEqual(['a', 'b', 'after']);
  });

  it('stops at a step that answers', async () => {
    const seen: string[] = [];
    const answer: RequestHandler = (_req, res) => void res.status(204).end();
    const res = await request(appWith([step('a', seen), answer, step('b', seen)], seen)).get('/');
    expect(res.status).toBe(204);
    expect(seen).toEqual(['a']);
  });

  it.each<[string, RequestHandler]>([
    [
      'a thrown error',
      () => {
        throw new Error('thrown');
      },
    ],
    ['next(error)', (_req, _res, next) => next(new Error('passed on'))],
    ['a rejected promise', async () => Promise.reject(new Error('rejected'))],
    [
      'an error passed on later',
      (_req, _res, next) => void setImmediate(() => next(new Error('later'))),
    ],
  ])('hands %s to the error handler and runs no later step', async (_name, failing) => {
    const seen: string[] = [];
    const res = await request(appWith([step('a', seen), failing, step('b', seen)], seen)).get('/');
    expect(res.status).toBe(500);
    expect(res.text).toMatch(/^(thrown|passed on|rejected|later)$/);
    expect(seen).toEqual(['a', 'error handler']);
  });

  it('turns a rejection without a reason into an error', async () => {
    const seen: string[] = [];
    const res = await request(appWith([async () => Promise.reject(undefined)], seen)).get('/');
    expect(res.status).toBe(500);
    expect(res.text).toBe('A step failed without a reason.');
  });
});
