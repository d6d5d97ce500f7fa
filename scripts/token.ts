import fs from 'node:fs';
import { parseArgs } from 'node:util';
import { ConfigError, parseConfig, type StoreConfig } from '../src/config';
import { endProcess } from '../src/process-end';
import {
  createTokensService,
  failureText,
  tokenName,
  UNPRINTABLE_NAME_CHARACTERS,
  type TokensService,
} from '../src/service/tokens-service';
import { openStore } from '../src/store/open-store';
import type { PlantStore, TokenRecord } from '../src/store/plant-store';

const USAGE = `Usage:
  npm run token -- create --name NAME   create a token and print its secret once
  npm run token -- list [--json]        list tokens (never their secrets)
  npm run token -- revoke ID            revoke a token; it stops working at once
  npm run token -- --help               print this
The store is the one the service uses (SQLITE_PATH, as in README's configuration table).
create makes it if it does not exist yet; list and revoke need one.`;

class UsageError extends Error {}

function formatDate(date: Date | undefined): string {
  return date === undefined ? '-' : date.toISOString();
}

/**
 * What is escaped so that output is safe on a terminal: each character a token name may not hold
 * (in a name stored before they were refused), written as JSON writes a character, `\u` and its
 * code, so `--json` stays JSON that parses to the exact name; in the table a backslash too,
 * doubled, so a name that holds the text `\u001b` shows apart from one that holds the character.
 */
const JSON_ESCAPES = new RegExp(UNPRINTABLE_NAME_CHARACTERS.source, 'gu');
const TABLE_ESCAPES = new RegExp(`\\\\|${UNPRINTABLE_NAME_CHARACTERS.source}`, 'gu');

function escaped(text: string, escapes: RegExp): string {
  return text.replace(escapes, (character) =>
    character === '\\' ? '\\\\' : `\\u${character.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

function formatTable(tokens: readonly TokenRecord[]): string {
  const rows = [
    ['ID', 'NAME', 'CREATED', 'LAST USED', 'REVOKED'],
    ...tokens.map((t) => [
      t.id,
      escaped(t.name, TABLE_ESCAPES),
      formatDate(t.createdAt),
      formatDate(t.lastUsedAt),
      formatDate(t.revokedAt),
    ]),
  ];
  // A loop, not Math.max(...lengths): spreading 130,000 arguments overflows the stack.
  const widths = rows[0]!.map((_, column) =>
    rows.reduce((widest, row) => Math.max(widest, row[column]!.length), 0),
  );
  return rows
    .map((row) =>
      row
        .map((cell, column) => cell.padEnd(widths[column]!))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

type Command =
  | { readonly kind: 'help' }
  | { readonly kind: 'create'; readonly name: string }
  | { readonly kind: 'list'; readonly json: boolean }
  | { readonly kind: 'revoke'; readonly id: string };

/** The first option that is given twice: which of the two was meant cannot be known. */
function repeatedOption(tokens: ReturnType<typeof parseArgs>['tokens']): string | undefined {
  const seen = new Set<string>();
  for (const token of tokens ?? []) {
    if (token.kind !== 'option') continue;
    if (seen.has(token.name)) return token.name;
    seen.add(token.name);
  }
  return undefined;
}

/**
 * The command the arguments ask for, or a UsageError (parseArgs throws its own TypeError for an
 * unknown option, tokenName a RangeError for a name it refuses). Read before any store is opened,
 * so that a mistyped command opens none, nor creates one.
 */
function parseCommand(args: string[]): Command {
  const { positionals, values, tokens } = parseArgs({
    args,
    allowPositionals: true,
    tokens: true,
    options: {
      name: { type: 'string' },
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  // Help is asked for however it is asked, even twice or beside a mistake.
  if (values.help === true) return { kind: 'help' };
  const repeated = repeatedOption(tokens);
  if (repeated !== undefined)
    throw new UsageError(`--${repeated} is given more than once.\n${USAGE}`);
  const [command, ...rest] = positionals;
  const { name, json } = values;
  if (command === 'create' && rest.length === 0 && name !== undefined && json === undefined)
    return { kind: 'create', name: tokenName(name) };
  if (command === 'list' && rest.length === 0 && name === undefined)
    return { kind: 'list', json: json === true };
  if (command === 'revoke' && rest.length === 1 && name === undefined && json === undefined)
    return { kind: 'revoke', id: rest[0]! };
  throw new UsageError(USAGE);
}

/**
 * Why the command cannot run on this store, if it cannot: list and revoke opened at a mistyped
 * SQLITE_PATH would create a store there (its directories too) and answer from it as if it were
 * the service's. create makes the store, so that a token can be made before the first start.
 */
function missingStore(store: StoreConfig, command: Command): string | undefined {
  if (command.kind === 'create' || store.kind !== 'sqlite' || fs.existsSync(store.path))
    return undefined;
  return `No token store exists at ${store.path} (SQLITE_PATH): check the path; the service's first start, or create, makes it.`;
}

async function run(
  tokens: TokensService,
  command: Exclude<Command, { kind: 'help' }>,
): Promise<number> {
  if (command.kind === 'create') {
    const token = await tokens.issue(command.name);
    process.stdout.write(
      `Created token ${token.id} (${token.name}). Its secret is shown this once; store it safely:\n${token.secret}\n`,
    );
    return 0;
  }
  if (command.kind === 'list') {
    const list = await tokens.list();
    process.stdout.write(
      `${command.json ? escaped(JSON.stringify(list), JSON_ESCAPES) : formatTable(list)}\n`,
    );
    return 0;
  }
  if (await tokens.revoke(command.id)) {
    process.stdout.write(`Revoked token ${command.id}.\n`);
    return 0;
  }
  process.stderr.write(`No active token has the id ${command.id}.\n`);
  return 1;
}

/** The store the command opened, looked at on the way out (see endProcess). */
let openedStore: PlantStore | undefined;

async function main(): Promise<number> {
  try {
    const command = parseCommand(process.argv.slice(2));
    if (command.kind === 'help') {
      process.stdout.write(`${USAGE}\n`);
      return 0;
    }
    const config = parseConfig(process.env);
    const missing = missingStore(config.store, command);
    if (missing !== undefined) {
      process.stderr.write(`${missing}\n`);
      return 1;
    }
    const store = await openStore(config.store);
    openedStore = store;
    try {
      return await run(createTokensService({ store }), command);
    } finally {
      await store.close();
    }
  } catch (error) {
    if (
      error instanceof UsageError ||
      error instanceof ConfigError ||
      error instanceof RangeError
    ) {
      process.stderr.write(`${error.message}\n`);
      return 2;
    }
    if (
      error instanceof TypeError &&
      'code' in error &&
      String(error.code).startsWith('ERR_PARSE_ARGS')
    ) {
      process.stderr.write(`${error.message}\n${USAGE}\n`);
      return 2;
    }
    // The store could not be reached or failed (DATABASE_URL down, a file that cannot be opened):
    // one line that says so, not a stack, and a second naming a created token left in doubt (a
    // create retried makes another, and the first, if kept, is active with its secret unshown).
    process.stderr.write(`The token store failed: ${failureText(error)}\n`);
    return 1;
  }
}

// Exits once stdout and stderr have taken every byte: process.exit at once would cut off what a
// pipe had not yet taken (a list of 150,000 tokens stopped after 3,537 lines).
main().then((code) =>
  process.stdout.write('', () => process.stderr.write('', () => endProcess(code, openedStore))),
);
