import type { Request, RequestHandler } from 'express';
import { Passport } from 'passport';
import { Strategy as BearerStrategy } from 'passport-http-bearer';
import type { Principal } from '../service/tokens-service';
import { HttpProblem } from './http-error';
import { routedOperation } from './route-gate';

const REALM = 'plants';

/** `Bearer`, in any case, one space, then one word: what bearerHeaders passes on unchanged. */
const ONE_BEARER_TOKEN = /^Bearer [^ \t]+$/i;

/**
 * The Authorization header as passport-http-bearer is to see it. The strategy answers 400 to any
 * header that is not two words one space apart, whatever its scheme; but a header of another
 * scheme (`Basic ...`, `Negotiate`, a token without the word `Bearer`) carries no bearer
 * credentials, which RFC 6750 section 3.1 answers 401 with the bare challenge, so the strategy is
 * shown none. A Bearer header (the scheme word in any case, RFC 9110 section 11.1) keeps its words,
 * one space apart, so that one with no token or several still answers 400.
 */
function bearerHeaders(authorization: string | undefined): { authorization?: string } {
  if (authorization === undefined) return {};
  // Nearly every request: one token after one space, passed on as it is (a split and a join per
  // request cost 2% to 3% of the requests in npm run bench:compare).
  if (ONE_BEARER_TOKEN.test(authorization)) return { authorization };
  const words = authorization.trim().split(/[ \t]+/);
  return /^Bearer$/i.test(words[0] ?? '') ? { authorization: words.join(' ') } : {};
}

/**
 * passport-http-bearer also reads `access_token` from the body and the query string. RFC 6750
 * section 5.3 says tokens must not travel in URLs, so the strategy is shown the header alone.
 */
class HeaderOnlyBearerStrategy extends BearerStrategy<
  (token: string, done: (error: unknown, user?: Principal | false) => void) => void
> {
  override authenticate(req: Request, options?: object): void {
    super.authenticate({ headers: bearerHeaders(req.headers.authorization) } as Request, options);
  }
}

const MESSAGES: Readonly<Record<number, string>> = {
  400: 'The Authorization header is malformed: send "Authorization: Bearer <token>".',
  401: 'A valid bearer token is required in the Authorization header.',
};

/** The 400 or 401 of a failed authentication, with its challenge (`invalid_request` when none is given). */
function refusal(code: number, challenge?: unknown): HttpProblem {
  const header =
    typeof challenge === 'string' ? challenge : `Bearer realm="${REALM}", error="invalid_request"`;
  return new HttpProblem(code, MESSAGES[code] ?? MESSAGES[401]!, { 'WWW-Authenticate': header });
}

/** How many Authorization lines the request had, before node:http joined them. */
function authorizationLines(req: Request): number {
  let lines = 0;
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    if (req.rawHeaders[i]!.toLowerCase() === 'authorization') lines++;
  }
  return lines;
}

/** Authenticates every secured operation with a bearer token from the Authorization header only. */
export function createBearerAuth(
  verify: (secret: string) => Promise<Principal | undefined>,
): RequestHandler {
  const passport = new Passport();
  passport.use(
    new HeaderOnlyBearerStrategy({ realm: REALM }, (token, done) => {
      verify(token).then((principal) => done(null, principal ?? false), done);
    }),
  );
  return (req, res, next) => {
    if (routedOperation(res)?.secured !== true) {
      next();
      return;
    }
    // node:http joins two Authorization lines with a comma (server.ts): two lines, whichever of
    // them is empty, are a malformed header (400), not a wrong token (401).
    if (req.headers.authorization?.includes(',') === true && authorizationLines(req) > 1) {
      next(refusal(400));
      return;
    }
    const authenticate = passport.authenticate(
      'bearer',
      { session: false },
      (error: unknown, principal: Principal | false, challenge?: unknown, status?: number) => {
        if (error) return next(error);
        if (principal) {
          req.user = principal;
          return next();
        }
        next(refusal(status ?? 401, challenge));
      },
    ) as RequestHandler;
    authenticate(req, res, next);
  };
}
