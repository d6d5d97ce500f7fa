import { parseArgs } from 'node:util';
import { ConfigError, parseConfig } from '../src/config';
import {
  createTokensService,
  UNPRINTABLE_NAME_CHARACTERS,
  type TokensService,
} from '../src/service/tokens-service';
import { openStore } from '../src/store/open-store';
import type { TokenRecord } from '../src/store/plant-store';

const USAGE = `Usage:
  npm run token -- create --name NAME   create a token and print its secret once
  npm run token -- list [--json]        list tokens (never their secrets)
  npm run token -- revoke ID            revoke a token; it stops working at once
The store is the one the service uses (SQLITE_PATH, as in README's configuration table).`;

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

async function run(tokens: TokensService, args: string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args,
    allowPositionals: true,
    options: { name: { type: 'string' }, json: { type: 'boolean', default: false } },
  });
  const [command, ...rest] = positionals;
  if (command === 'create' && rest.length === 0 && values.name !== undefined) {
    const token = await tokens.issue(values.name);
    process.stdout.write(
      `Created token ${token.id} (${token.name}). Its secret is shown this once; store it safely:\n${token.secret}\n`,
    );
    return 0;
  }
  if (command === 'list' && rest.length === 0 && values.name === undefined) {
    const list = await tokens.list();
    process.stdout.write(
      `${values.json ? escaped(JSON.stringify(list), JSON_ESCAPES) : formatTable(list)}\n`,
    );
    return 0;
  }
  if (command === 'revoke' && rest.length === 1 && values.name === undefined) {
    if (await tokens.revoke(rest[0]!)) {
      process.stdout.write(`Revoked token ${rest[0]}.\n`);
      return 0;
    }
    process.stderr.write(`No active token has the id ${rest[0]}.\n`);
    return 1;
  }
  throw new UsageError(USAGE);
}

async function main(): Promise<number> {
  try {
    const config = parseConfig(process.env);
    const store = await openStore(config.store);
    try {
      return await run(createTokensService({ store }), process.argv.slice(2));
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
    // one line that says so, not a stack.
    process.stderr.write(
      `The token store failed: ${error instanceof Error ? error.message : String(error)}\n`,
    );
    return 1;
  }
}

// Exits once stdout and stderr have taken every byte: process.exit at once would cut off what a
// pipe had not yet taken (a list of 150,000 tokens stopped after 3,537 lines).
main().then((code) =>
  process.stdout.write('', () => process.stderr.write('', () => process.exit(code))),
);
