/** A plant as the caller creates it; the id is exact over the whole int64 range. */
export interface NewPlant {
  readonly id: bigint;
  readonly name: string;
  readonly tag?: string;
}

/** A stored plant as the API shows it: every field but the id. */
export interface Plant {
  readonly name: string;
  readonly tag?: string;
}

/** The plant a store answers for `plant` once stored: a new object, with `tag` only when it has one. */
export function shownPlant(plant: NewPlant): Plant {
  return plant.tag === undefined ? { name: plant.name } : { name: plant.name, tag: plant.tag };
}

/** What is stored of an API token: never the secret, only its SHA-256 hash. */
export interface NewToken {
  readonly id: string;
  readonly name: string;
  readonly hash: string;
  readonly createdAt: Date;
}

/** An API token as listed to operators. */
export interface TokenRecord {
  readonly id: string;
  readonly name: string;
  readonly createdAt: Date;
  readonly lastUsedAt?: Date;
  readonly revokedAt?: Date;
}

/** Tells a cache of token look-ups when what it holds may have gone stale. */
export interface TokenChangeWatch {
  /**
   * A number that differs from every earlier result once a token may have been added, revoked or
   * removed since, by this process or any other. Synchronous and cheap: it is read once a turn of
   * the event loop that authenticates requests, and again by a look-up that finds no token kept in
   * memory (see VerifiedTokens).
   */
  version(): number;
}

/**
 * Calls into the disk that a store makes off the event loop: a sync on libuv's thread pool, a
 * checkpoint on a thread of its own. Node's exit joins those threads, so it waits for any such
 * call still running, however long a disk that stopped answering takes.
 */
export interface OffLoopDiskCalls {
  /** Whether one has not returned yet. */
  pending(): boolean;
}

/** How the store's WAL is checkpointed (SQLite; see createWalCheckpoints). */
export interface WalCheckpointState {
  /**
   * Whether checkpoints are SQLite's own, on the event loop: the checkpoint thread failed or could
   * not start, and has not yet seen a checkpoint through since (it is tried again now and then).
   */
  handedBack(): boolean;
}

/**
 * Running totals of a store's group commits (see createGroupCommit), read when metrics are scraped:
 * over the commits, how many writes share one, and how long their syncs take, which together set
 * what `synchronous=FULL` costs.
 */
export interface CommitTotals {
  /** Group commits whose writes were answered: committed and, under FULL, synced. */
  readonly commits: number;
  /** The writes in those commits. */
  readonly writes: number;
  /** The time their WAL syncs took under FULL, from the commit to the sync's completion (0 under NORMAL). */
  readonly syncSeconds: number;
}

/**
 * The storage behind the service. Each method is one unit of work; absence is reported in the
 * return value, never as an exception, and the service decides whether it is an error.
 */
export interface PlantStore {
  /** Stores the plant and returns it, or returns undefined when its id is taken. */
  createPlant(plant: NewPlant): Promise<Plant | undefined>;
  /** Removes the plant and returns true, or returns false when no plant has the id. */
  deletePlant(id: bigint): Promise<boolean>;
  /** Stores a new token. */
  insertToken(token: NewToken): Promise<void>;
  /** The token with this hash unless it is revoked, or undefined. */
  findActiveToken(hash: string): Promise<TokenRecord | undefined>;
  /** Records that the token was used at the given time. */
  touchToken(id: string, at: Date): Promise<void>;
  /** Every token, revoked ones included, oldest first. */
  listTokens(): Promise<TokenRecord[]>;
  /** Revokes the token and returns true, or returns false when no active token has the id. */
  revokeToken(id: string, at: Date): Promise<boolean>;
  /** How many tokens are not revoked. */
  countActiveTokens(): Promise<number>;
  /** Resolves when the store answers a trivial query and can still take writes. */
  ping(): Promise<void>;
  /** Releases the store's resources; no method may be called afterwards. */
  close(): Promise<void>;
  /**
   * Present when the store learns at once, and cheaply, of every change to its tokens; look-ups
   * of tokens are cached only then (see createTokensService).
   */
  readonly tokenChanges?: TokenChangeWatch;
  /** Present when the store group-commits its writes in transactions of its own (SQLite). */
  readonly commitTotals?: CommitTotals;
  /** Present when the store calls into the disk off the event loop (SQLite). */
  readonly offLoopDiskCalls?: OffLoopDiskCalls;
  /** Present when the store checkpoints a WAL of its own (SQLite). */
  readonly walCheckpoints?: WalCheckpointState;
  /**
   * Present when the store can come to a state only a restart leaves (SQLite, after a failed
   * sync): resolves with the reason once every write fails; the process should then stop.
   */
  readonly stopped?: Promise<Error>;
}

/** The store cannot answer now (unreachable, restarting, overloaded); the request may be retried. */
export class StoreUnavailableError extends Error {
  constructor(options?: { cause?: unknown }) {
    super('The store is unavailable.', options);
    this.name = 'StoreUnavailableError';
  }
}
