import { hash } from 'node:crypto';
import fs from 'node:fs';
import type * as Yaml from 'yaml';

const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;

/** One operation of the contract, as the HTTP layer needs it before any handler runs. */
export interface OperationInfo {
  readonly operationId: string;
  readonly secured: boolean;
  readonly hasRequestBody: boolean;
  /** Whether it declares any query parameter (on itself or on its path). */
  readonly takesQuery: boolean;
}

/** A path of the contract: its matcher and its operations by upper-case method. */
export interface RouteInfo {
  readonly template: string;
  /** Matches the whole path; group i captures the raw (still percent-encoded) parameter i. */
  readonly pattern: RegExp;
  /** The template's parameter names, in order. */
  readonly parameters: readonly string[];
  readonly operations: ReadonlyMap<string, OperationInfo>;
}

/** The contract, loaded once: the file's text, its JSON form, and the parsed object. */
export interface OpenApiDocument {
  readonly yaml: string;
  readonly json: string;
  /** The parsed document, with plain JS numbers, for the validator. */
  readonly spec: Record<string, unknown>;
  readonly routes: readonly RouteInfo[];
}

type Json = null | boolean | number | bigint | string | Json[] | { [key: string]: Json };

/** JSON text that keeps integers above 2^53 exact, as the YAML wrote them. */
function toExactJson(value: Json): string {
  if (typeof value === 'bigint') return value.toString();
  if (Array.isArray(value)) return `[${value.map(toExactJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const members = Object.entries(value).map(([k, v]) => `${JSON.stringify(k)}:${toExactJson(v)}`);
    return `{${members.join(',')}}`;
  }
  return JSON.stringify(value);
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

function compileTemplate(template: string): RegExp {
  const source = template
    .split(/\{[^}/]+\}/)
    .map(escapeRegExp)
    .join('([^/]+)');
  return new RegExp(`^${source}$`);
}

/** A parameter object, following local `$ref`s; throws for a reference the document cannot resolve. */
function resolveParameter(
  spec: Record<string, unknown>,
  parameter: unknown,
): Record<string, unknown> {
  let resolved = parameter as Record<string, unknown> | undefined;
  for (let hops = 0; typeof resolved?.['$ref'] === 'string'; hops++) {
    const ref = resolved['$ref'] as string;
    if (!ref.startsWith('#/') || hops === 10) {
      throw new Error(
        `The contract's parameter reference ${ref} does not resolve in the document.`,
      );
    }
    resolved = ref
      .slice(2)
      .split('/')
      .map((part) => part.replace(/~1/g, '/').replace(/~0/g, '~'))
      .reduce<unknown>(
        (node, part) => (node as Record<string, unknown> | undefined)?.[part],
        spec,
      ) as Record<string, unknown> | undefined;
  }
  if (resolved === undefined) throw new Error("A contract's parameter reference does not resolve.");
  return resolved;
}

/** Whether any of `parameters` (objects or local `$ref`s to them) is in the query. */
function declaresQuery(spec: Record<string, unknown>, parameters: unknown): boolean {
  return (
    Array.isArray(parameters) &&
    parameters.some((parameter) => resolveParameter(spec, parameter)['in'] === 'query')
  );
}

function readRoutes(spec: Record<string, unknown>): RouteInfo[] {
  const globalSecurity = (spec['security'] as unknown[] | undefined) ?? [];
  const paths = (spec['paths'] ?? {}) as Record<string, Record<string, unknown>>;
  return Object.entries(paths).map(([template, item]) => {
    const operations = new Map<string, OperationInfo>();
    for (const method of HTTP_METHODS) {
      const operation = item[method] as Record<string, unknown> | undefined;
      if (operation === undefined) continue;
      const security = (operation['security'] as unknown[] | undefined) ?? globalSecurity;
      operations.set(method.toUpperCase(), {
        operationId: String(operation['operationId']),
        secured: security.length > 0,
        hasRequestBody: operation['requestBody'] !== undefined,
        takesQuery:
          declaresQuery(spec, item['parameters']) || declaresQuery(spec, operation['parameters']),
      });
    }
    const parameters = [...template.matchAll(/\{([^}/]+)\}/g)].map((match) => match[1]!);
    return { template, pattern: compileTemplate(template), parameters, operations };
  });
}

/** The contract's JSON form, written by `npm run build` and keyed by the SHA-256 of the YAML it came from. */
interface ContractCache {
  readonly yamlSha256: string;
  readonly json: string;
}

/** The contract's YAML as JSON text, integers above 2^53 exact as written. */
export function contractJson(yaml: string): string {
  // Loaded only here: parsing the YAML (and loading the parser) was a tenth of start-up.
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- only when there is no cache
  const YAML = require('yaml') as typeof Yaml;
  return toExactJson(YAML.parse(yaml, { intAsBigInt: true }) as Json);
}

/** Writes the cache that loadOpenApiDocument reads instead of parsing the YAML (`npm run build`). */
export function writeContractCache(specFile: string, cacheFile: string): void {
  const yaml = fs.readFileSync(specFile, 'utf8');
  const cache: ContractCache = { yamlSha256: hash('sha256', yaml), json: contractJson(yaml) };
  fs.writeFileSync(cacheFile, `${JSON.stringify(cache)}\n`);
}

/** The cached JSON form of exactly this YAML text, or undefined (no cache, unreadable, or of another text). */
function cachedJson(yaml: string, cacheFile: string | undefined): string | undefined {
  if (cacheFile === undefined) return undefined;
  let cache: Partial<ContractCache>;
  try {
    cache = JSON.parse(fs.readFileSync(cacheFile, 'utf8')) as Partial<ContractCache>;
  } catch {
    return undefined;
  }
  return cache.yamlSha256 === hash('sha256', yaml) && typeof cache.json === 'string'
    ? cache.json
    : undefined;
}

/**
 * Reads the contract from a YAML file. Its JSON form comes from `cacheFile` when that was written
 * from this very text (by `npm run build`), else from parsing the YAML; the parsed object is read
 * from the JSON, with plain JS numbers, for the validator.
 */
export function loadOpenApiDocument(file: string, cacheFile?: string): OpenApiDocument {
  const yaml = fs.readFileSync(file, 'utf8');
  const json = cachedJson(yaml, cacheFile) ?? contractJson(yaml);
  const spec = JSON.parse(json) as Record<string, unknown>;
  return { yaml, json, spec, routes: readRoutes(spec) };
}
