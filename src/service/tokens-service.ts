import { createHash, randomBytes } from 'node:crypto';
import type { PlantStore, TokenRecord } from '../store/plant-store';

/** Every secret starts with this, so that secret scanners can recognise a leaked token. */
export const TOKEN_PREFIX = 'plnt_';
const SECRET_BYTES = 32;
const MAX_NAME_LENGTH = 100;
/** last_used_at is written at most once per token in this interval, to keep writes off the hot path. */
export const LAST_USED_GRANULARITY_MS = 60_000;

export interface IssuedToken {
  readonly id: string;
  readonly name: string;
  readonly createdAt: Date;
  /** The bearer secret: shown once, never stored. */
  readonly secret: string;
}

/** Who made a request: the token that authenticated it. */
export interface Principal {
  readonly tokenId: string;
  readonly tokenName: string;
}

export interface TokensService {
  /** Creates a token; throws a RangeError when the name is empty or longer than 100 characters. */
  issue(name: string): Promise<IssuedToken>;
  /** The principal of an active token's secret, or undefined for an unknown or revoked one. */
  verify(secret: string): Promise<Principal | undefined>;
  list(): Promise<TokenRecord[]>;
  /** Revokes the token; false when no active token has the id. Takes effect on the next request. */
  revoke(id: string): Promise<boolean>;
  countActive(): Promise<number>;
}

function hashSecret(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}

/** Token lifecycle over a store: random 256-bit secrets, stored only as SHA-256 hashes. */
export function createTokensService({
  store,
  now = () => new Date(),
}: {
  store: PlantStore;
  now?: () => Date;
}): TokensService {
  return {
    async issue(name) {
      const trimmed = name.trim();
      if (trimmed.length === 0 || [...trimmed].length > MAX_NAME_LENGTH) {
        throw new RangeError(`A token name must have 1 to ${MAX_NAME_LENGTH} characters.`);
      }
      const secret = TOKEN_PREFIX + randomBytes(SECRET_BYTES).toString('base64url');
      const token = { id: randomBytes(6).toString('hex'), name: trimmed, createdAt: now() };
      await store.insertToken({ ...token, hash: hashSecret(secret) });
      return { ...token, secret };
    },
    async verify(secret) {
      if (!secret.startsWith(TOKEN_PREFIX)) return undefined;
      const token = await store.findActiveToken(hashSecret(secret));
      if (token === undefined) return undefined;
      const at = now();
      if (
        token.lastUsedAt === undefined ||
        at.getTime() - token.lastUsedAt.getTime() >= LAST_USED_GRANULARITY_MS
      ) {
        await store.touchToken(token.id, at);
      }
      return { tokenId: token.id, tokenName: token.name };
    },
    list: () => store.listTokens(),
    revoke: (id) => store.revokeToken(id, now()),
    countActive: () => store.countActiveTokens(),
  };
}
