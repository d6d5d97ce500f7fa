import fc from 'fast-check';
import { INT64_MAX, INT64_MIN } from './plant-oracle';

/** The few ids generated bodies and paths mostly use, so that creates and deletes meet. */
export const FUZZ_IDS: readonly bigint[] = [
  0n,
  1n,
  2n,
  3n,
  -1n,
  42n,
  2n ** 53n + 1n,
  INT64_MAX,
  INT64_MIN,
];

export type AuthForm = 'valid' | 'missing' | 'invalid' | 'malformed' | 'garbage';

/** One generated HTTP request for node:http, with what the generator knows about it. */
export interface FuzzRequest {
  readonly method: string;
  readonly path: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Buffer | undefined;
  readonly chunked: boolean;
  readonly auth: AuthForm;
}

/** Printable Latin-1, the widest a header value or request line written by node:http may use. */
export function latin1(maxLength: number, minLength = 0): fc.Arbitrary<string> {
  return fc
    .array(fc.oneof(fc.integer({ min: 0x20, max: 0x7e }), fc.integer({ min: 0x80, max: 0xff })), {
      minLength,
      maxLength,
    })
    .map((codes) => String.fromCharCode(...codes));
}

function hex(code: number, width: number): string {
  return code.toString(16).toUpperCase().padStart(width, '0');
}

/** Percent-encodes every byte of the UTF-8 form (lone surrogates become U+FFFD, as Buffer does). */
function percentEncodeAll(text: string): string {
  return [...Buffer.from(text, 'utf8')].map((byte) => `%${hex(byte, 2)}`).join('');
}

/** JSON text of a string with everything outside ASCII escaped. */
function asciiJson(text: string): string {
  return JSON.stringify(text).replace(/[\u007f-\uffff]/g, (c) => `\\u${hex(c.charCodeAt(0), 4)}`);
}

/** The same number written in ways JSON and JSON Schema treat as that integer. */
function equivalentNumbers(id: bigint): string[] {
  const text = id.toString();
  const sign = id < 0n ? '-' : '';
  const digits = id < 0n ? text.slice(1) : text;
  return [
    text,
    text,
    text,
    `${text}.0`,
    `${text}e0`,
    `${text}E+00`,
    `${text}00e-2`,
    `${sign}0.${digits}e${digits.length}`,
    `${text}.000`,
    `${sign}${digits}0E-1`,
  ];
}

export const idNumberText: fc.Arbitrary<string> = fc.oneof(
  {
    weight: 12,
    arbitrary: fc
      .constantFrom(...FUZZ_IDS)
      .chain((id) => fc.constantFrom(...equivalentNumbers(id))),
  },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      '-0',
      '0e5',
      '-0.0e-3',
      '1.5',
      '0.5',
      '1e-400',
      '1.0000000000000000001',
      '9223372036854775808',
      '-9223372036854775809',
      '1e19',
      '1e400',
      '-1e400',
      '123456789012345678901234567890',
      '9.223372036854775807e18',
      '-9.223372036854775808e18',
      '922337203685477580.7e1',
      '1E+999999999999',
      '1e-999999999999',
    ),
  },
  { weight: 1, arbitrary: fc.bigInt({ min: -(2n ** 65n), max: 2n ** 65n }).map(String) },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      '"1"',
      'null',
      'true',
      '[1]',
      '{}',
      '"9223372036854775807"',
      '01',
      '+1',
      '.5',
      '1.',
      'NaN',
      '-',
    ),
  },
);

const fieldText: fc.Arbitrary<string> = fc.oneof(
  { weight: 5, arbitrary: fc.string({ minLength: 1, maxLength: 12 }) },
  { weight: 2, arbitrary: fc.string({ unit: 'grapheme', maxLength: 8 }) },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 8 }) },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      '',
      'a'.repeat(255),
      'a'.repeat(256),
      '\u{1f335}'.repeat(255),
      '\u{1f335}'.repeat(256),
      'a\u0000',
      '\ud800',
      'x\udc00',
      '\ud83c',
      'Monstera deliciosa',
      ' ',
      '\u2028\u2029',
      'e\u0301',
      '\\',
      '"',
    ),
  },
  { weight: 1, arbitrary: fc.string({ minLength: 250, maxLength: 260 }) },
);

const whitespace = fc.constantFrom('', '', '', ' ', '\n', '\t', ' \r\n ');

interface PlantShape {
  readonly id: string | undefined;
  readonly name: string | undefined;
  readonly tag: string | undefined;
  readonly extras: ReadonlyArray<readonly [string, unknown]>;
  readonly duplicate: 'id' | 'name' | 'tag' | undefined;
  readonly escapeKeys: boolean;
  readonly asciiOnly: boolean;
  readonly turn: number;
  readonly space: string;
  readonly wrapper: string;
  readonly cut: number;
}

function plantText(shape: PlantShape): Buffer {
  const key = (name: string) =>
    shape.escapeKeys
      ? `"${[...name].map((c) => `\\u${hex(c.charCodeAt(0), 4)}`).join('')}"`
      : JSON.stringify(name);
  const string = (value: string) => (shape.asciiOnly ? asciiJson(value) : JSON.stringify(value));
  const members: string[] = [];
  if (shape.id !== undefined) members.push(`${key('id')}:${shape.space}${shape.id}`);
  if (shape.name !== undefined) members.push(`${key('name')}:${shape.space}${string(shape.name)}`);
  if (shape.tag !== undefined) members.push(`${key('tag')}:${shape.space}${string(shape.tag)}`);
  for (const [name, value] of shape.extras) {
    members.push(`${key(name)}:${JSON.stringify(value) ?? 'null'}`);
  }
  if (shape.duplicate !== undefined) {
    const again = members.find((member) => member.startsWith(key(shape.duplicate as string)));
    if (again !== undefined) members.push(again);
  }
  // Rotate the members, so keys come in every order.
  const turn = shape.turn % Math.max(members.length, 1);
  const ordered = [...members.slice(turn), ...members.slice(0, turn)];
  const s = shape.space;
  let text = `{${s}${ordered.join(`${s},${s}`)}${s}}`;
  switch (shape.wrapper) {
    case 'bom':
      text = `\ufeff${text}`;
      break;
    case 'trailing-comma':
      text = text.replace(/\s*}$/, ',}');
      break;
    case 'trailing-text':
      text = `${text}x`;
      break;
    case 'two-documents':
      text = `${text} ${text}`;
      break;
    case 'array':
      text = `[${text}]`;
      break;
    case 'padded':
      text = `\n\t ${text} \r\n`;
      break;
  }
  const bytes = Buffer.from(text, 'utf8');
  return shape.wrapper === 'truncated' ? bytes.subarray(0, shape.cut % (bytes.length + 1)) : bytes;
}

/** A create body: mostly a valid NewPlant, with every way of being almost one. */
export const plantBody: fc.Arbitrary<Buffer> = fc
  .record({
    id: fc.option(idNumberText, { nil: undefined, freq: 12 }),
    name: fc.option(fieldText, { nil: undefined, freq: 12 }),
    tag: fc.option(fieldText, { nil: undefined, freq: 2 }),
    extras: fc.oneof(
      { weight: 12, arbitrary: fc.constant([] as Array<[string, unknown]>) },
      {
        weight: 1,
        arbitrary: fc.array(
          fc.tuple(
            fc.oneof(
              fc.constantFrom('ID', 'Name', 'colour', '__proto__', 'constructor', 'id ', ''),
              fc.string({ maxLength: 6 }),
            ),
            fc.jsonValue({ maxDepth: 2 }),
          ),
          { minLength: 1, maxLength: 2 },
        ),
      },
    ),
    duplicate: fc.oneof(
      { weight: 15, arbitrary: fc.constant(undefined) },
      { weight: 1, arbitrary: fc.constantFrom('id' as const, 'name' as const, 'tag' as const) },
    ),
    escapeKeys: fc.nat(9).map((n) => n === 0),
    asciiOnly: fc.boolean(),
    turn: fc.nat(5),
    space: whitespace,
    wrapper: fc.oneof(
      { weight: 20, arbitrary: fc.constant('plain') },
      {
        weight: 7,
        arbitrary: fc.constantFrom(
          'bom',
          'trailing-comma',
          'trailing-text',
          'two-documents',
          'array',
          'padded',
          'truncated',
        ),
      },
    ),
    cut: fc.nat(),
  })
  .map(plantText);

/** Bytes of exactly `size`: a valid create body padded with whitespace (over 64 KiB answers 413). */
function paddedPlant(size: number, id: bigint): Buffer {
  const head = `{"id":${id},"name":"big"`;
  return Buffer.from(`${head}${' '.repeat(Math.max(0, size - head.length - 1))}}`, 'utf8');
}

export const anyBody: fc.Arbitrary<Buffer | undefined> = fc.oneof(
  { weight: 14, arbitrary: plantBody },
  { weight: 1, arbitrary: fc.constant(undefined) },
  { weight: 1, arbitrary: fc.constant(Buffer.alloc(0)) },
  {
    weight: 2,
    arbitrary: fc
      .jsonValue({ maxDepth: 3 })
      .map((value) => Buffer.from(JSON.stringify(value) ?? 'null', 'utf8')),
  },
  { weight: 2, arbitrary: fc.uint8Array({ maxLength: 64 }).map((bytes) => Buffer.from(bytes)) },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.constantFrom(...FUZZ_IDS), fc.uint8Array({ minLength: 1, maxLength: 4 }))
      .map(([id, bytes]) =>
        Buffer.concat([
          Buffer.from(`{"id":${id},"name":"`),
          Buffer.from(bytes.map((byte) => byte | 0x80)),
          Buffer.from('"}'),
        ]),
      ),
  },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.constantFrom(65535, 65536, 65537, 70000), fc.constantFrom(...FUZZ_IDS))
      .map(([size, id]) => paddedPlant(size, id)),
  },
);

const idSegment: fc.Arbitrary<string> = fc.constantFrom(...FUZZ_IDS).map(String);

/** A path segment where /plants/{id} takes an id. */
export const pathSegment: fc.Arbitrary<string> = fc.oneof(
  { weight: 10, arbitrary: idSegment },
  {
    weight: 3,
    arbitrary: idSegment.chain((id) =>
      fc.constantFrom(
        `0${id}`,
        `+${id}`,
        `${id}.0`,
        `${id}e0`,
        `%2B${id}`,
        percentEncodeAll(id),
        `%20${id}`,
        `${id}%20`,
        `${id}%00`,
        `${id};x=1`,
        `${id}%2F`,
        `${id}.`,
      ),
    ),
  },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      '-0',
      '00',
      '.',
      '..',
      '%2e',
      '%2E%2E',
      '%',
      '%zz',
      '%E0%A4%A',
      '%C0%AF',
      '%FF',
      '%00',
      '9223372036854775808',
      '-9223372036854775809',
      'null',
      '1,2',
      '%2F',
      '\\',
      '~',
      "'",
      '*',
      '{id}',
      ':id',
    ),
  },
  { weight: 1, arbitrary: fc.integer({ min: 20, max: 20_000 }).map((n) => '1'.repeat(n)) },
  { weight: 1, arbitrary: fc.string({ unit: 'grapheme', maxLength: 10 }).map(encodeURIComponent) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 6 }).map(percentEncodeAll) },
  {
    weight: 1,
    arbitrary: latin1(8, 1).map((text) => text.replace(/[ /?#]/g, '_')),
  },
  { weight: 1, arbitrary: fc.stringMatching(/^[\x21-\x7e]{1,12}$/) },
);

const knownPaths = fc.constantFrom(
  '/healthz',
  '/readyz',
  '/openapi.yaml',
  '/openapi.json',
  '/docs',
  '/docs/assets/docs.js',
  '/metrics',
  '/',
  '//plants',
  '/plants/',
  '/PLANTS',
  '/plants//1',
  '/plants/1/',
  '/plants/./1',
  '/plants/../plants',
  '*',
  'http://127.0.0.1/plants',
  '/%70lants',
  '/plants%2F1',
);

/** A query string or fragment, mostly none; the token in the query must never count (RFC 6750). */
function queryFor(token: string): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 20, arbitrary: fc.constant('') },
    {
      weight: 2,
      arbitrary: fc.constantFrom(
        '?',
        '?x=1',
        '?id=1',
        '?%zz=1',
        '?a',
        '?&',
        '?=',
        '#frag',
        '?x=1#y',
      ),
    },
    {
      weight: 1,
      arbitrary: fc.constantFrom(
        `?access_token=${token}`,
        `?access_token=${token}&access_token=${token}`,
        `?bearer=${token}`,
      ),
    },
    { weight: 1, arbitrary: pathSegment.map((segment) => `?q=${segment}`) },
  );
}

export const anyPath: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: fc.constant('/plants') },
  { weight: 4, arbitrary: pathSegment.map((segment) => `/plants/${segment}`) },
  { weight: 2, arbitrary: knownPaths },
  { weight: 1, arbitrary: pathSegment.map((segment) => `/docs/assets/${segment}`) },
  { weight: 1, arbitrary: pathSegment.map((segment) => `/${segment}`) },
  {
    weight: 1,
    arbitrary: fc.tuple(pathSegment, pathSegment).map(([a, b]) => `/plants/${a}/${b}`),
  },
);

const KNOWN_METHODS = [
  'PUT',
  'PATCH',
  'OPTIONS',
  'TRACE',
  'PROPFIND',
  'PROPPATCH',
  'MKCOL',
  'COPY',
  'MOVE',
  'LOCK',
  'UNLOCK',
  'SEARCH',
  'PURGE',
  'REPORT',
  'MKACTIVITY',
  'CHECKOUT',
  'MERGE',
  'M-SEARCH',
  'NOTIFY',
  'SUBSCRIBE',
  'UNSUBSCRIBE',
  'LINK',
  'UNLINK',
  'SOURCE',
  'ACL',
  'BIND',
  'REBIND',
  'UNBIND',
  'MKCALENDAR',
  'QUERY',
];

export const anyMethod: fc.Arbitrary<string> = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom('GET', 'POST', 'DELETE', 'HEAD') },
  { weight: 2, arbitrary: fc.constantFrom(...KNOWN_METHODS) },
  { weight: 1, arbitrary: fc.stringMatching(/^[A-Za-z][A-Za-z_-]{0,11}$/) },
);

export function authorization(token: string): fc.Arbitrary<{ form: AuthForm; value?: string }> {
  const other = `plnt_${'A'.repeat(43)}`;
  return fc.oneof(
    {
      weight: 10,
      arbitrary: fc
        .constantFrom(
          `Bearer ${token}`,
          `Bearer ${token}`,
          `bearer ${token}`,
          `BEARER ${token}`,
          `Bearer  \t ${token}`,
          ` Bearer ${token}\t`,
        )
        .map((value) => ({ form: 'valid' as const, value })),
    },
    { weight: 1, arbitrary: fc.constant({ form: 'missing' as const }) },
    {
      weight: 1,
      arbitrary: fc
        .constantFrom(
          `Bearer ${other}`,
          `Bearer ${token}x`,
          `Bearer ${token.slice(0, -1)}`,
          `Bearer ${token.toUpperCase()}`,
          `Basic ${Buffer.from(`user:${token}`).toString('base64')}`,
          `Token ${token}`,
          `Bearer "${token}"`,
          '',
          // Another scheme, however many words: no bearer token (401), not a malformed one.
          'Negotiate',
          'Digest username="a", realm="b"',
          `Bearer=${token}`,
          token,
        )
        .map((value) => ({ form: 'invalid' as const, value })),
    },
    {
      weight: 1,
      arbitrary: fc
        .constantFrom('Bearer', `Bearer ${token} ${token}`, `Bearer a b`, `Bearer ${token}\tx`)
        .map((value) => ({ form: 'malformed' as const, value })),
    },
    {
      weight: 1,
      arbitrary: latin1(40).map((value) => ({ form: 'garbage' as const, value })),
    },
  );
}

const contentType: fc.Arbitrary<string | undefined> = fc.oneof(
  {
    weight: 12,
    arbitrary: fc.constantFrom(
      'application/json',
      'application/json',
      'application/json',
      'Application/JSON',
      'application/json; charset=utf-8',
      'application/json;charset=UTF-8',
      'application/json; charset="utf-8"',
      'application/json; foo=bar',
      'application/json ; charset=utf-8',
    ),
  },
  { weight: 1, arbitrary: fc.constant(undefined) },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      'application/json; charset=latin1',
      'application/json; charset=utf-16',
      'application/json; charset',
      'application/json; charset=utf-8; charset=utf-16',
      'text/plain',
      'text/json',
      'application/jsonx',
      'application/merge-patch+json',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
      '*/*',
      '',
      'application/json, text/plain',
    ),
  },
  { weight: 1, arbitrary: latin1(30) },
);

const contentEncoding: fc.Arbitrary<string | undefined> = fc.oneof(
  { weight: 20, arbitrary: fc.constant(undefined) },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      'identity',
      'IDENTITY',
      ' identity',
      'gzip',
      'deflate',
      'br',
      'gzip, identity',
      'identity, gzip',
      '',
    ),
  },
  { weight: 1, arbitrary: latin1(12) },
);

/** Headers this generator never sets at random: framing, hop-by-hop, and ones set on purpose. */
const RESERVED_HEADERS = new Set([
  'authorization',
  'content-type',
  'content-encoding',
  'content-length',
  'transfer-encoding',
  'host',
  'connection',
  'keep-alive',
  'proxy-connection',
  'upgrade',
  'expect',
  'te',
  'trailer',
]);

const headerName: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(
    'X-Request-Id',
    'X-Request-Id',
    'Accept',
    'Accept-Encoding',
    'Accept-Language',
    'Origin',
    'Referer',
    'User-Agent',
    'Cookie',
    'X-Forwarded-For',
    'X-Forwarded-Proto',
    'X-HTTP-Method-Override',
    'If-None-Match',
    'If-Modified-Since',
    'Range',
    'Cache-Control',
    'Access-Control-Request-Method',
    'Access-Control-Request-Headers',
    'Forwarded',
    'Via',
    'Max-Forwards',
    'Prefer',
    'Content-Language',
    'Content-Range',
    'Idempotency-Key',
    'Proxy-Authorization',
  ),
  fc.stringMatching(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,24}$/),
);

const headerValue: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: latin1(40) },
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      'request-1',
      'a'.repeat(128),
      'a'.repeat(129),
      'x y',
      'abc:def._-',
      'https://evil.example',
      'null',
      'bytes=0-1',
      '*',
      'DELETE',
      '0',
      '127.0.0.1, 10.0.0.1',
    ),
  },
  { weight: 1, arbitrary: fc.integer({ min: 1000, max: 20_000 }).map((n) => 'v'.repeat(n)) },
);

const extraHeaders: fc.Arbitrary<ReadonlyArray<readonly [string, string]>> = fc.oneof(
  { weight: 3, arbitrary: fc.constant([]) },
  { weight: 1, arbitrary: fc.array(fc.tuple(headerName, headerValue), { maxLength: 4 }) },
);

function assemble(parts: {
  method: string;
  path: string;
  query: string;
  auth: { form: AuthForm; value?: string };
  contentType: string | undefined;
  contentEncoding: string | undefined;
  extra: ReadonlyArray<readonly [string, string]>;
  expectContinue: boolean;
  body: Buffer | undefined;
  chunked: boolean;
}): FuzzRequest {
  const headers: Record<string, string> = {};
  for (const [name, value] of parts.extra) {
    const lower = name.toLowerCase();
    if (
      !RESERVED_HEADERS.has(lower) &&
      !Object.keys(headers).some((k) => k.toLowerCase() === lower)
    ) {
      headers[name] = value;
    }
  }
  if (parts.auth.value !== undefined) headers['Authorization'] = parts.auth.value;
  if (parts.contentType !== undefined) headers['Content-Type'] = parts.contentType;
  if (parts.contentEncoding !== undefined) headers['Content-Encoding'] = parts.contentEncoding;
  if (parts.expectContinue && parts.body !== undefined) headers['Expect'] = '100-continue';
  return {
    method: parts.method,
    path: `${parts.path}${parts.query}`,
    headers,
    body: parts.body,
    chunked: parts.chunked && parts.body !== undefined,
    auth: parts.auth.form,
  };
}

const chunked = fc.nat(19).map((n) => n < 3);
const expectContinue = fc.nat(19).map((n) => n === 0);

/**
 * Requests of every kind: mostly shaped like a create or a delete (so the store is exercised),
 * the rest anything at all.
 */
export function fuzzRequest(token: string): fc.Arbitrary<FuzzRequest> {
  const auth = authorization(token);
  const query = queryFor(token);
  const create = fc.record({
    method: fc.oneof(
      { weight: 12, arbitrary: fc.constant('POST') },
      { weight: 1, arbitrary: anyMethod },
    ),
    path: fc.oneof(
      { weight: 12, arbitrary: fc.constant('/plants') },
      { weight: 1, arbitrary: anyPath },
    ),
    query,
    auth,
    contentType,
    contentEncoding,
    extra: extraHeaders,
    expectContinue,
    body: anyBody,
    chunked,
  });
  const remove = fc.record({
    method: fc.oneof(
      { weight: 12, arbitrary: fc.constant('DELETE') },
      { weight: 1, arbitrary: anyMethod },
    ),
    path: pathSegment.map((segment) => `/plants/${segment}`),
    query,
    auth,
    contentType: fc.oneof(
      { weight: 3, arbitrary: fc.constant(undefined) },
      { weight: 1, arbitrary: contentType },
    ),
    contentEncoding,
    extra: extraHeaders,
    expectContinue,
    body: fc.oneof(
      { weight: 3, arbitrary: fc.constant(undefined) },
      { weight: 1, arbitrary: anyBody },
    ),
    chunked,
  });
  const anything = fc.record({
    method: anyMethod,
    path: anyPath,
    query,
    auth,
    contentType,
    contentEncoding,
    extra: extraHeaders,
    expectContinue,
    body: fc.option(anyBody, { nil: undefined, freq: 2 }),
    chunked,
  });
  return fc
    .oneof(
      { weight: 5, arbitrary: create },
      { weight: 4, arbitrary: remove },
      { weight: 2, arbitrary: anything },
    )
    .map(assemble);
}

/** One raw request on the wire: a request line, header lines and a body, each possibly broken. */
export interface RawRequest {
  readonly bytes: Buffer;
  /** The method and target as the server reads them (Latin-1) from the request line. */
  readonly method: string;
  readonly target: string;
}

function rawRequestOf(bytes: Buffer): RawRequest {
  const line = bytes.toString('latin1').split(/[\r\n]/, 1)[0] ?? '';
  const [method = '', target = ''] = line.split(' ');
  return { bytes, method, target };
}

const rawMethod: fc.Arbitrary<string> = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom('GET', 'POST', 'DELETE', 'HEAD', 'OPTIONS') },
  { weight: 2, arbitrary: fc.constantFrom(...KNOWN_METHODS) },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      'CONNECT',
      'PRI',
      'get',
      'Get',
      'POST\t',
      'GET\u0000',
      'DESCRIBE',
      '',
    ),
  },
  { weight: 1, arbitrary: fc.stringMatching(/^[!-~]{1,10}$/) },
  { weight: 1, arbitrary: latin1(8) },
);

const rawTarget: fc.Arbitrary<string> = fc.oneof(
  { weight: 6, arbitrary: anyPath },
  {
    weight: 2,
    // Unicode sent as raw UTF-8 bytes, which node:http as a client would refuse to send.
    arbitrary: fc
      .string({ unit: 'grapheme', minLength: 1, maxLength: 8 })
      .map((text) => `/plants/${Buffer.from(text, 'utf8').toString('latin1')}`),
  },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      '*',
      '',
      'plants',
      '/a b',
      '/plants/1 HTTP/1.1',
      '/\t',
      '/plants/\u00001',
      'http://[::1]:80/plants',
      'localhost:80',
      '//',
      '/' + 'a'.repeat(17_000),
    ),
  },
  { weight: 1, arbitrary: latin1(24) },
);

/** A raw header line: the token's own Authorization among the usual ones, and broken ones. */
function rawHeaderLine(token: string): fc.Arbitrary<string> {
  return fc.oneof(
    {
      weight: 4,
      arbitrary: fc.constantFrom(
        'Content-Type: application/json',
        'Accept: */*',
        'Connection: keep-alive',
        'Connection: close',
        'Authorization: Bearer plnt_not-a-token',
        'Authorization: Bearer',
        'Expect: 100-continue',
        'X-Request-Id: raw-1',
      ),
    },
    {
      weight: 2,
      arbitrary: fc.constantFrom(
        `Authorization: Bearer ${token}`,
        `Authorization: Bearer ${token}`,
        `authorization: bearer ${token}`,
        `Authorization:Bearer ${token}`,
      ),
    },
    {
      weight: 2,
      arbitrary: fc
        .constantFrom('0', '2', '-1', '+2', '2, 2', '99999999999999999999', 'abc', ' 2', '0x2', '')
        .map((length) => `Content-Length: ${length}`),
    },
    {
      weight: 2,
      arbitrary: fc
        .constantFrom(
          'chunked',
          'gzip, chunked',
          'chunked, gzip',
          'identity',
          'CHUNKED',
          'chunked, chunked',
          'xchunked',
        )
        .map((encoding) => `Transfer-Encoding: ${encoding}`),
    },
    {
      weight: 2,
      arbitrary: fc.constantFrom(
        ' folded continuation',
        '\tfolded',
        'NoColon',
        ': no name',
        'Bad Name: x',
        'X: a\u0000b',
        'X: a\rb',
        'Host: second.example',
        'Upgrade: websocket',
        'Connection: Upgrade',
        'Upgrade: h2c',
        'Content-Length: 2\r\nContent-Length: 3',
        'Transfer-Encoding: chunked\r\nContent-Length: 2',
        'X-Long: ' + 'v'.repeat(17_000),
      ),
    },
    {
      weight: 2,
      arbitrary: fc.tuple(headerName, latin1(30)).map(([name, value]) => `${name}: ${value}`),
    },
    { weight: 1, arbitrary: latin1(30) },
  );
}

const rawBody: fc.Arbitrary<Buffer> = fc.oneof(
  { weight: 4, arbitrary: fc.constant(Buffer.alloc(0)) },
  { weight: 2, arbitrary: plantBody },
  {
    weight: 1,
    arbitrary: fc
      .constantFrom('2\r\n{}\r\n0\r\n\r\n', 'zz\r\n', '0\r\n\r\n', '2\r\n{}', '{}')
      .map((text) => Buffer.from(text)),
  },
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 40 }).map((bytes) => Buffer.from(bytes)) },
);

/** A body in chunked framing, in two chunks when it has two bytes or more. */
function chunkedOf(body: Buffer, extension = ''): Buffer {
  const half = Math.floor(body.length / 2);
  const parts: Buffer[] = [];
  for (const piece of [body.subarray(0, half), body.subarray(half)]) {
    if (piece.length === 0) continue;
    parts.push(
      Buffer.from(`${piece.length.toString(16)}${extension}\r\n`),
      piece,
      Buffer.from('\r\n'),
    );
  }
  parts.push(Buffer.from('0\r\n\r\n'));
  return Buffer.concat(parts);
}

/** Framing header lines and the bytes after the head. */
interface Framed {
  readonly lines: readonly string[];
  readonly payload: Buffer;
}

/**
 * The ways a raw create or delete frames its body: well-formed ones (which the server must run),
 * then ones that RFC 9112 section 6 makes ambiguous or broken, which it must refuse. A server that
 * picked one reading of these would run a request with a valid token and body it must not run;
 * the `smuggled` ones also carry, after what one reading takes for the end of the body, a whole
 * authenticated delete that only a server misreading the framing would run. The names are only
 * intentions: what the test holds a request to is what readRawRequest (raw-request.ts) reads.
 */
const FRAMINGS: Readonly<Record<string, (body: Buffer, smuggled: Buffer) => Framed>> = {
  // Well-formed.
  'Content-Length': (body) => ({ lines: [`Content-Length: ${body.length}`], payload: body }),
  chunked: (body) => ({ lines: ['Transfer-Encoding: chunked'], payload: chunkedOf(body) }),
  'CHUNKED with extensions': (body) => ({
    lines: ['Transfer-Encoding:\tCHUNKED'],
    payload: chunkedOf(body, ';x=1'),
  }),
  'gzip, chunked': (body) => ({
    lines: ['Transfer-Encoding: gzip, chunked'],
    payload: chunkedOf(body),
  }),
  'no framing': () => ({ lines: [], payload: Buffer.alloc(0) }),
  // To refuse.
  'chunked and Content-Length': (body) => {
    const payload = chunkedOf(body);
    return {
      lines: ['Transfer-Encoding: chunked', `Content-Length: ${payload.length}`],
      payload,
    };
  },
  'Content-Length and chunked': (body) => ({
    lines: [`Content-Length: ${body.length}`, 'Transfer-Encoding: chunked'],
    payload: body,
  }),
  'two Content-Lengths': (body) => ({
    lines: [`Content-Length: ${body.length}`, `Content-Length: ${body.length + 1}`],
    payload: Buffer.concat([body, Buffer.from(' ')]),
  }),
  'a list of two lengths': (body) => ({
    lines: [`Content-Length: ${body.length}, ${body.length + 1}`],
    payload: Buffer.concat([body, Buffer.from(' ')]),
  }),
  'a signed length': (body) => ({ lines: [`Content-Length: +${body.length}`], payload: body }),
  'a space before the colon': (body) => ({
    lines: ['Transfer-Encoding : chunked', `Content-Length: ${body.length}`],
    payload: body,
  }),
  'chunked, gzip': (body) => ({
    lines: ['Transfer-Encoding: chunked, gzip'],
    payload: chunkedOf(body),
  }),
  'chunked on two lines, identity last': (body) => ({
    lines: ['Transfer-Encoding: chunked', 'Transfer-Encoding: identity'],
    payload: chunkedOf(body),
  }),
  'identity and Content-Length': (body) => ({
    lines: ['Transfer-Encoding: identity', `Content-Length: ${body.length}`],
    payload: body,
  }),
  'folded chunked and Content-Length': (body) => ({
    lines: ['Transfer-Encoding:\r\n chunked', `Content-Length: ${body.length}`],
    payload: body,
  }),
  'a chunk longer than its size': (body) => ({
    lines: ['Transfer-Encoding: chunked'],
    payload: Buffer.concat([
      Buffer.from(`${Math.max(0, body.length - 1).toString(16)}\r\n`),
      body,
      Buffer.from('\r\n0\r\n\r\n'),
    ]),
  }),
  smuggled: (body, smuggled) => {
    const payload = Buffer.concat([Buffer.from('0\r\n\r\n'), smuggled]);
    return {
      lines: ['Transfer-Encoding: chunked', `Content-Length: ${payload.length}`],
      payload,
    };
  },
  'smuggled past a first Content-Length': (body, smuggled) => ({
    lines: ['Content-Length: 0', `Content-Length: ${smuggled.length}`],
    payload: smuggled,
  }),
  'smuggled past an empty chunked body': (body, smuggled) => ({
    lines: ['Transfer-Encoding: chunked, identity'],
    payload: Buffer.concat([Buffer.from('0\r\n\r\n'), smuggled]),
  }),
};

const FRAMING_NAMES = Object.keys(FRAMINGS);
const WELL_FORMED_FRAMINGS = 5;

/** Half of them well-formed (Content-Length the most), half each way to refuse. */
const rawFraming: fc.Arbitrary<string> = fc.oneof(
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      ...FRAMING_NAMES.slice(0, WELL_FORMED_FRAMINGS),
      'Content-Length',
      'Content-Length',
      'chunked',
    ),
  },
  { weight: 1, arbitrary: fc.constantFrom(...FRAMING_NAMES.slice(WELL_FORMED_FRAMINGS)) },
);

/**
 * Raw creates and deletes with the real token (mostly), shaped to reach the store: framed well
 * (half of them), or in one of the ways a server must refuse, with a few raw header lines more.
 */
function rawStoreRequest(token: string): fc.Arbitrary<RawRequest> {
  const authorized = fc.constantFrom(
    `Authorization: Bearer ${token}`,
    `Authorization: Bearer ${token}`,
    `Authorization: Bearer ${token}`,
    `Authorization: bearer ${token}`,
    `Authorization: Bearer ${token}`,
    `Authorization: Bearer ${token}`,
    'Authorization: Bearer plnt_not-a-token',
    '',
  );
  const create = fc.record({
    line: fc.constant('POST /plants'),
    contentType: fc.constantFrom(
      'Content-Type: application/json',
      'Content-Type: application/json',
      'Content-Type: application/json',
      '',
    ),
    // Mostly a plain valid NewPlant at one of the ids, so that creates succeed.
    body: fc.oneof(
      {
        weight: 2,
        arbitrary: fc
          .tuple(fc.constantFrom(...FUZZ_IDS), fc.stringMatching(/^[a-z]{1,8}$/))
          .map(([id, name]) => Buffer.from(`{"id":${id},"name":"${name}"}`)),
      },
      { weight: 1, arbitrary: plantBody },
    ),
  });
  const remove = fc.record({
    line: fc
      .oneof({ weight: 3, arbitrary: idSegment }, { weight: 1, arbitrary: pathSegment })
      .map((segment) => `DELETE /plants/${segment}`),
    contentType: fc.constant(''),
    body: fc.oneof(
      { weight: 4, arbitrary: fc.constant(Buffer.alloc(0)) },
      { weight: 1, arbitrary: fc.constant(Buffer.from('{}')) },
    ),
  });
  // The request a misread framing would run: a delete of one of the ids the store holds.
  const smuggled = fc
    .constantFrom(...FUZZ_IDS)
    .map((id) =>
      Buffer.from(
        `DELETE /plants/${id} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\n\r\n`,
      ),
    );
  return fc
    .record({
      request: fc.oneof({ weight: 3, arbitrary: create }, { weight: 2, arbitrary: remove }),
      version: fc.constantFrom('HTTP/1.1', 'HTTP/1.1', 'HTTP/1.1', 'HTTP/1.1', 'HTTP/1.0'),
      auth: authorized,
      framing: rawFraming,
      smuggled,
      extra: fc.oneof(
        { weight: 4, arbitrary: fc.constant([] as string[]) },
        { weight: 1, arbitrary: fc.array(rawHeaderLine(token), { minLength: 1, maxLength: 2 }) },
      ),
      turn: fc.nat(),
      eol: fc.constantFrom('\r\n', '\r\n', '\r\n', '\r\n', '\r\n', '\r\n', '\r\n', '\n'),
    })
    .map(({ request, version, auth, framing, smuggled: inner, extra, turn, eol }) => {
      const { lines: framingLines, payload } = (FRAMINGS[framing] as (typeof FRAMINGS)[string])(
        request.body,
        inner,
      );
      // The framing lines stay together and in order; the others come in every order around them.
      const lines = [auth, request.contentType, framingLines.join(eol), ...extra].filter(
        (line) => line !== '',
      );
      const at = turn % (lines.length + 1);
      const rotated = [...lines.slice(at), ...lines.slice(0, at)];
      const head = [`${request.line} ${version}`, 'Host: 127.0.0.1', ...rotated].join(eol);
      return rawRequestOf(Buffer.concat([Buffer.from(`${head}${eol}${eol}`, 'latin1'), payload]));
    });
}

/**
 * Raw requests: mostly anything at all, often broken at every level, and the rest creates and
 * deletes with the real token, well-formed or framed in a way the server must refuse (see
 * readRawRequest in raw-request.ts for what is which).
 */
export function rawRequest(token: string): fc.Arbitrary<RawRequest> {
  return fc.oneof(
    {
      weight: 8,
      arbitrary: fc
        .record({
          method: rawMethod,
          target: rawTarget,
          version: fc.constantFrom(
            'HTTP/1.1',
            'HTTP/1.1',
            'HTTP/1.1',
            'HTTP/1.1',
            'HTTP/1.1',
            'HTTP/1.0',
            'HTTP/1.2',
            'HTTP/2.0',
            'HTTP/0.9',
            'http/1.1',
            'HTTP/1',
            '',
          ),
          host: fc.constantFrom(
            'Host: 127.0.0.1',
            'Host: 127.0.0.1',
            'Host: 127.0.0.1',
            '',
            'Host:',
          ),
          headers: fc.array(rawHeaderLine(token), { maxLength: 4 }),
          // A Content-Length that is the body's, at the end.
          exactLength: fc.nat(3).map((n) => n === 0),
          eol: fc.constantFrom('\r\n', '\r\n', '\r\n', '\r\n', '\r\n', '\r\n', '\n', '\r'),
          body: rawBody,
        })
        .map(({ method, target, version, host, headers, exactLength, eol, body }) => {
          const lines = [
            `${method} ${target} ${version}`.trimEnd(),
            host,
            ...headers,
            exactLength ? `Content-Length: ${body.length}` : '',
          ].filter((line, index) => index === 0 || line !== '');
          const head = Buffer.from(`${lines.join(eol)}${eol}${eol}`, 'latin1');
          return rawRequestOf(Buffer.concat([head, body]));
        }),
    },
    { weight: 4, arbitrary: rawStoreRequest(token) },
    {
      weight: 1,
      arbitrary: fc
        .uint8Array({ minLength: 1, maxLength: 200 })
        .map((bytes) => rawRequestOf(Buffer.from(bytes))),
    },
  );
}
