/**
 * Reads a V8 .cpuprofile (node --cpu-prof) and says where the main thread's time went inside a
 * window: by component of the service (self time, each sample given to the innermost frame that
 * belongs to a known component), by inclusive time (samples with such a frame anywhere on the
 * stack), and by function.
 */
import fs from 'node:fs';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** Components of one request, in the terms of issue 5. */
export const COMPONENTS = [
  'auth (passport, SHA-256, token lookup)',
  'body (media type, raw read, lossless JSON)',
  'validator (express-openapi-validator, ajv)',
  'store (SQLite / PostgreSQL driver, commit)',
  'route gate',
  'request log (pino, request id)',
  'metrics (prom-client)',
  'protections (helmet, limits, CORS)',
  'handlers, service, errors',
  'response (res.json, headers, write)',
  'express (router, middleware chain)',
  'node http/net/streams (platform)',
  'GC',
  'V8 / native, unattributed (program)',
  'other',
] as const;
export type Component = (typeof COMPONENTS)[number] | 'idle';

/** Files that own the time spent in them and below them; the first rule that matches wins. */
const OWNERS: readonly [RegExp, Component][] = [
  [
    /\/src\/http\/bearer-auth|\/src\/service\/tokens-service|\/node_modules\/(passport|passport-http-bearer|passport-strategy|pause|utils-merge)\//,
    'auth (passport, SHA-256, token lookup)',
  ],
  [
    /\/src\/store\/|\/node_modules\/(better-sqlite3|bindings|pg|pg-pool|pg-protocol|pg-types|pg-connection-string|pgpass|postgres-array|postgres-bytea|postgres-date|postgres-interval)\//,
    'store (SQLite / PostgreSQL driver, commit)',
  ],
  [
    /\/src\/http\/(json-body|lossless-json)|\/node_modules\/(body-parser|raw-body|iconv-lite|bytes)\//,
    'body (media type, raw read, lossless JSON)',
  ],
  [
    /\/src\/http\/validator\.|\/node_modules\/(express-openapi-validator|ajv|ajv-formats|ajv-draft-04|json-schema-traverse|fast-deep-equal|fast-uri|lodash\.clonedeep|lodash\.get|ono|multer|@apidevtools|path-to-regexp)\//,
    'validator (express-openapi-validator, ajv)',
  ],
  [/\/src\/http\/route-gate/, 'route gate'],
  [
    /\/src\/http\/request-log|\/src\/logger\.|\/node_modules\/(pino|pino-http|pino-std-serializers|sonic-boom|fast-redact|quick-format-unescaped|atomic-sleep|on-exit-leak-free|thread-stream|safe-stable-stringify|fast-safe-stringify)\//,
    'request log (pino, request id)',
  ],
  [/\/src\/metrics\.|\/node_modules\/(prom-client|tdigest|bintrees)\//, 'metrics (prom-client)'],
  [
    /\/src\/http\/protections|\/node_modules\/(helmet|express-rate-limit|cors)\//,
    'protections (helmet, limits, CORS)',
  ],
  [
    /\/src\/http\/(plants-handlers|service-handlers|int64|error-handler|http-error|operations-router)|\/src\/service\//,
    'handlers, service, errors',
  ],
  [
    /\/node_modules\/express\/lib\/response\.js|\/node_modules\/(send|etag|fresh|content-disposition|vary|cookie|cookie-signature)\//,
    'response (res.json, headers, write)',
  ],
  [
    /\/node_modules\/(express|router|finalhandler|is-promise)\/|\/src\/app\.|\/src\/main\.|\/src\/http\/pipeline\./,
    'express (router, middleware chain)',
  ],
];

/** The benchmark's own preload (scripts/bench/probe.ts), which wraps better-sqlite3's calls. */
const PROBE = /\/scripts\/bench\/probe\.js$/;

function ownerOf(url: string): Component | undefined {
  if (url === '') return undefined;
  for (const [pattern, component] of OWNERS) if (pattern.test(url)) return component;
  return undefined;
}

export interface FunctionTime {
  readonly name: string;
  readonly where: string;
  readonly ms: number;
  readonly percent: number;
}

export interface ProfileBreakdown {
  /** Window length and how much of it the main thread was not idle, in ms. */
  readonly windowMs: number;
  readonly busyMs: number;
  readonly idleMs: number;
  readonly sampleCount: number;
  /** Self time per component, in ms and in % of busy time (sums to 100). */
  readonly self: readonly { component: Component; ms: number; percentOfBusy: number }[];
  /** Inclusive: % of busy time with the component anywhere on the stack. */
  readonly inclusive: readonly { component: Component; ms: number; percentOfBusy: number }[];
  readonly topSelf: readonly FunctionTime[];
  /** Functions of the project and its packages by inclusive time (node internals left out). */
  readonly topTotal: readonly FunctionTime[];
}

function shortWhere(frame: CallFrame): string {
  const url = frame.url.replace(/^file:\/\//, '');
  const modules = url.lastIndexOf('/node_modules/');
  const short =
    modules >= 0
      ? url.slice(modules + '/node_modules/'.length)
      : url.includes('/dist/')
        ? url.slice(url.indexOf('/dist/') + 1)
        : url;
  return short === '' ? '(native)' : `${short}:${frame.lineNumber + 1}`;
}

/** Breaks down the samples between `fromUs` and `toUs` (the profile's clock: CLOCK_MONOTONIC, µs). */
export function analyseCpuProfile(file: string, fromUs?: number, toUs?: number): ProfileBreakdown {
  const profile = JSON.parse(fs.readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map<number, ProfileNode>();
  const parent = new Map<number, number>();
  for (const node of profile.nodes) {
    byId.set(node.id, node);
    for (const child of node.children ?? []) parent.set(child, node.id);
  }
  const from = fromUs !== undefined && fromUs > profile.startTime ? fromUs : profile.startTime;
  const to = toUs !== undefined && toUs > from && toUs < profile.endTime ? toUs : profile.endTime;

  const selfByComponent = new Map<Component, number>();
  const inclusiveByComponent = new Map<Component, number>();
  const selfByNode = new Map<number, number>();
  const totalByFunction = new Map<string, { frame: CallFrame; us: number }>();
  let idleUs = 0;
  let busyUs = 0;
  let sampleCount = 0;
  let time = profile.startTime;

  for (let i = 0; i < profile.samples.length; i++) {
    // A sample is given the time since the one before: a thread blocked in a system call (fsync)
    // takes its sample only when the call returns, so that gap belongs to where it is then.
    const us = profile.timeDeltas[i] ?? 0;
    time += us;
    if (time < from || time >= to) continue;
    const leafId = profile.samples[i]!;
    const leaf = byId.get(leafId)!;
    sampleCount++;
    if (leaf.callFrame.functionName === '(idle)') {
      idleUs += us;
      continue;
    }
    busyUs += us;
    // The probe's timing wrappers are not the service's: their time is their caller's.
    let selfId = leafId;
    while (PROBE.test(byId.get(selfId)!.callFrame.url) && parent.has(selfId)) {
      selfId = parent.get(selfId)!;
    }
    selfByNode.set(selfId, (selfByNode.get(selfId) ?? 0) + us);

    let owner: Component | undefined;
    let platform = false;
    const seenComponents = new Set<Component>();
    const seenFunctions = new Set<string>();
    for (let id: number | undefined = leafId; id !== undefined; id = parent.get(id)) {
      const frame = byId.get(id)!.callFrame;
      const component = ownerOf(frame.url);
      if (component !== undefined) {
        owner ??= component;
        seenComponents.add(component);
      }
      if (frame.url.startsWith('node:')) platform = true;
      if (frame.url !== '' && !frame.url.startsWith('node:') && !PROBE.test(frame.url)) {
        const key = `${frame.functionName}@${frame.url}:${frame.lineNumber}`;
        if (!seenFunctions.has(key)) {
          seenFunctions.add(key);
          const entry = totalByFunction.get(key) ?? { frame, us: 0 };
          entry.us += us;
          totalByFunction.set(key, entry);
        }
      }
    }
    const name = leaf.callFrame.functionName;
    owner ??=
      name === '(garbage collector)'
        ? 'GC'
        : name === '(program)'
          ? 'V8 / native, unattributed (program)'
          : platform
            ? 'node http/net/streams (platform)'
            : 'other';
    if (name === '(garbage collector)') owner = 'GC';
    selfByComponent.set(owner, (selfByComponent.get(owner) ?? 0) + us);
    for (const component of seenComponents) {
      inclusiveByComponent.set(component, (inclusiveByComponent.get(component) ?? 0) + us);
    }
  }

  const percent = (us: number) => (busyUs === 0 ? 0 : (100 * us) / busyUs);
  const rows = (map: Map<Component, number>) =>
    COMPONENTS.filter((component) => map.has(component)).map((component) => ({
      component,
      ms: map.get(component)! / 1000,
      percentOfBusy: percent(map.get(component)!),
    }));

  const selfByFunction = new Map<string, { frame: CallFrame; us: number }>();
  for (const [id, us] of selfByNode) {
    const frame = byId.get(id)!.callFrame;
    const key = `${frame.functionName}@${frame.url}:${frame.lineNumber}`;
    const entry = selfByFunction.get(key) ?? { frame, us: 0 };
    entry.us += us;
    selfByFunction.set(key, entry);
  }
  const top = (map: Map<string, { frame: CallFrame; us: number }>, count: number) =>
    [...map.values()]
      .sort((a, b) => b.us - a.us)
      .slice(0, count)
      .map(({ frame, us }) => ({
        name: frame.functionName || '(anonymous)',
        where: shortWhere(frame),
        ms: us / 1000,
        percent: percent(us),
      }));

  return {
    windowMs: (to - from) / 1000,
    busyMs: busyUs / 1000,
    idleMs: idleUs / 1000,
    sampleCount,
    self: rows(selfByComponent),
    inclusive: rows(inclusiveByComponent),
    topSelf: top(selfByFunction, 20),
    topTotal: top(totalByFunction, 25),
  };
}
