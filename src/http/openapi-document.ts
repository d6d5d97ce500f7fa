import fs from 'node:fs';
import YAML from 'yaml';

const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;

/** One operation of the contract, as the HTTP layer needs it before any handler runs. */
export interface OperationInfo {
  readonly operationId: string;
  readonly secured: boolean;
  readonly hasRequestBody: boolean;
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
      });
    }
    const parameters = [...template.matchAll(/\{([^}/]+)\}/g)].map((match) => match[1]!);
    return { template, pattern: compileTemplate(template), parameters, operations };
  });
}

/** The same value with every bigint as a plain number, as YAML.parse without intAsBigInt gives it. */
function withPlainNumbers(value: Json): unknown {
  if (typeof value === 'bigint') return Number(value);
  if (Array.isArray(value)) return value.map(withPlainNumbers);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, withPlainNumbers(v)]));
  }
  return value;
}

/** Reads the contract from a YAML file, parsing it once (YAML parsing is a sixth of start-up). */
export function loadOpenApiDocument(file: string): OpenApiDocument {
  const yaml = fs.readFileSync(file, 'utf8');
  const exact = YAML.parse(yaml, { intAsBigInt: true }) as Json;
  const spec = withPlainNumbers(exact) as Record<string, unknown>;
  return { yaml, json: toExactJson(exact), spec, routes: readRoutes(spec) };
}
