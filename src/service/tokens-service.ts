import { hash, randomBytes } from 'node:crypto';
import { errorText } from '../error-text';
import { ExpiringMap } from '../expiring-map';
import type { PlantStore, TokenRecord } from '../store/plant-store';
import { VerifiedTokens } from './verified-tokens';

/** Every secret starts with this, so that secret scanners can recognise a leaked token. */
export const TOKEN_PREFIX = 'plnt_';
const SECRET_BYTES = 32;
const MAX_NAME_LENGTH = 100;
/**
 * Characters a token name may not hold: the control characters (C0, DEL, C1), which a terminal
 * would run as commands, the line and paragraph separators (U+2028, U+2029), which break a line
 * of `list`'s table in some terminals and editors, and the bidirectional overrides and isolates,
 * which make text display in another order than it is stored. `list` shows such characters
 * escaped if an older name has them.
 */
export const UNPRINTABLE_NAME_CHARACTERS = /[\p{Cc}\u2028\u2029\u202A-\u202E\u2066-\u2069]/u;
/**
 * The name a token is stored under: `name` trimmed. Throws a RangeError when that is empty, longer
 * than 100 characters, or holds a character of UNPRINTABLE_NAME_CHARACTERS; the token CLI asks
 * before it opens any store.
 */
export function tokenName(name: string): string {
  const trimmed = name.trim();
  if (trimmed.length === 0 || [...trimmed].length > MAX_NAME_LENGTH) {
    throw new RangeError(`A token name must have 1 to ${MAX_NAME_LENGTH} characters.`);
  }
  if (trimmed.search(UNPRINTABLE_NAME_CHARACTERS) !== -1) {
    throw new RangeError('A token name must not hold control characters.');
  }
  return trimmed;
}
/** last_used_at is written at most once per token in this interval, to keep writes off the hot path. */
export const LAST_USED_GRANULARITY_MS = 60_000;
/** How many verified tokens a process keeps in memory (see createTokensService). */
export const VERIFIED_TOKENS_CAPACITY = 10_000;

export interface IssuedToken {
  readonly id: string;
  readonly name: string;
  readonly createdAt: Date;
  /** The bearer secret: shown once, never stored. */
  readonly secret: string;
}

/** What TokenInDoubtError and failureText say of the token, without an ending. */
const inDoubt = (tokenId: string) =>
  `Token ${tokenId} may have been stored before the store failed`;

/**
 * issue() failed once the store was asked to keep the token: whether it was kept is not known (a
 * connection lost after the commit, a sync that failed or timed out after it), so it may be
 * active though its secret was never shown. `cause` is the store's error.
 */
export class TokenInDoubtError extends Error {
  constructor(
    readonly tokenId: string,
    options: { cause: unknown },
  ) {
    super(`${inDoubt(tokenId)}.`, options);
  }
}

/**
 * errorText(error), for an operator who must act on it: for a TokenInDoubtError, the store's error,
 * then on a line of its own which token may have been kept and how to find and end it.
 */
export function failureText(error: unknown): string {
  if (!(error instanceof TokenInDoubtError)) return errorText(error);
  const id = error.tokenId;
  return (
    `${errorText(error.cause)}\n${inDoubt(id)}, with its secret never shown: ` +
    `if npm run token -- list shows it, revoke it (npm run token -- revoke ${id}).`
  );
}

/** Who made a request: the token that authenticated it. */
export interface Principal {
  readonly tokenId: string;
  readonly tokenName: string;
}

export interface TokensService {
  /**
   * Creates a token; throws a RangeError when the name is empty, longer than 100 characters, or
   * holds a control character (see UNPRINTABLE_NAME_CHARACTERS), and a TokenInDoubtError when the
   * store fails to keep it.
   */
  issue(name: string): Promise<IssuedToken>;
  /** The principal of an active token's secret, or undefined for an unknown or revoked one. */
  verify(secret: string): Promise<Principal | undefined>;
  list(): Promise<TokenRecord[]>;
  /** Revokes the token; false when no active token has the id. Takes effect on the next request. */
  revoke(id: string): Promise<boolean>;
  countActive(): Promise<number>;
}

/** SHA-256 hex of the secret's UTF-8 bytes; crypto.hash is a third of createHash's cost per request. */
function hashSecret(secret: string): string {
  return hash('sha256', secret);
}

function dueForTouch(lastUsedAt: Date | undefined, at: Date): boolean {
  return (
    lastUsedAt === undefined || at.getTime() - lastUsedAt.getTime() >= LAST_USED_GRANULARITY_MS
  );
}

interface VerifiedToken {
  readonly principal: Principal;
  readonly lastUsedAt: Date | undefined;
}

/**
 * Token lifecycle over a store: random 256-bit secrets, stored only as SHA-256 hashes.
 *
 * When the store has a token change watch (SQLite), verify() keeps the tokens it found active in
 * memory, by hash, and answers from there until any token changes anywhere (a revocation by this
 * process, by the CLI or by another process), so a revocation still takes effect on the next
 * request: the watch is read once a turn of the event loop, after the turn's requests were read
 * (VerifiedTokens.afterReads). Once per LAST_USED_GRANULARITY_MS a token is read again to record
 * its use. Stores without a watch (PostgreSQL) are asked on every request.
 */
export function createTokensService({
  store,
  now = () => new Date(),
}: {
  store: PlantStore;
  now?: () => Date;
}): TokensService {
  const verified =
    store.tokenChanges === undefined
      ? undefined
      : new VerifiedTokens<VerifiedToken>(store.tokenChanges, VERIFIED_TOKENS_CAPACITY);
  /**
   * By token id, when this process last began to record the token's use (ms since the epoch):
   * requests that find a token due at the same time (every look-up in flight read the old time)
   * record it once, not once each. An entry ends once the next use is due again.
   */
  const touchedAt = new ExpiringMap<number>((last) => last + LAST_USED_GRANULARITY_MS);
  const touch = async (id: string, at: Date): Promise<void> => {
    const last = touchedAt.get(id);
    if (last !== undefined && at.getTime() - last < LAST_USED_GRANULARITY_MS) return;
    touchedAt.set(id, at.getTime(), at.getTime());
    try {
      await store.touchToken(id, at);
    } catch (error) {
      // Not recorded: the next request tries again.
      if (touchedAt.get(id) === at.getTime()) touchedAt.delete(id);
      throw error;
    }
  };
  return {
    async issue(name) {
      const trimmed = tokenName(name);
      const secret = TOKEN_PREFIX + randomBytes(SECRET_BYTES).toString('base64url');
      const token = { id: randomBytes(6).toString('hex'), name: trimmed, createdAt: now() };
      try {
        await store.insertToken({ ...token, hash: hashSecret(secret) });
      } catch (error) {
        throw new TokenInDoubtError(token.id, { cause: error });
      }
      return { ...token, secret };
    },
    async verify(secret) {
      if (!secret.startsWith(TOKEN_PREFIX)) return undefined;
      const secretHash = hashSecret(secret);
      const at = now();
      // The watch is read once for the requests of a turn, after they were all read.
      const readAt = verified === undefined ? undefined : await verified.afterReads();
      const cached = verified?.get(secretHash);
      if (cached !== undefined && !dueForTouch(cached.lastUsedAt, at)) return cached.principal;
      const token = await store.findActiveToken(secretHash);
      if (token === undefined) return undefined;
      let lastUsedAt = token.lastUsedAt;
      if (dueForTouch(lastUsedAt, at)) {
        await touch(token.id, at);
        lastUsedAt = at;
      }
      const principal = Object.freeze({ tokenId: token.id, tokenName: token.name });
      if (readAt !== undefined) verified?.set(secretHash, { principal, lastUsedAt }, readAt);
      return principal;
    },
    list: () => store.listTokens(),
    revoke: (id) => store.revokeToken(id, now()),
    countActive: () => store.countActiveTokens(),
  };
}
