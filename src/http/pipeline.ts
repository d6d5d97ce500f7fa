import type { NextFunction, Request, RequestHandler, Response } from 'express';

/**
 * Runs middleware in order as one Express middleware, with Express 5's rules: `next()` goes on,
 * `next(error)`, a thrown error or a rejected promise stops the chain and hands the error to the
 * next error handler outside it. The request path crosses one router layer instead of one per step:
 * Express's per-layer matching and bookkeeping was an eighth of a request's CPU (README,
 * "What bought the most"). No step may call `next` twice; none of these does.
 */
export function pipeline(steps: readonly (RequestHandler | undefined)[]): RequestHandler {
  const chain = steps.filter((step): step is RequestHandler => step !== undefined);
  return (req: Request, res: Response, done: NextFunction) => {
    let index = 0;
    const fail = (reason: unknown): void =>
      done(reason ?? new Error('A step failed without a reason.'));
    const next = (error?: unknown): void => {
      if (error !== undefined && error !== null) {
        done(error);
        return;
      }
      const step = chain[index++];
      if (step === undefined) {
        done();
        return;
      }
      try {
        const result = step(req, res, next) as unknown;
        if (result instanceof Promise) result.catch(fail);
      } catch (thrown) {
        fail(thrown);
      }
    };
    next();
  };
}
