import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { RequestHandler } from 'express';
import type { OperationId } from './openapi-types';
import { pathParameter } from './route-gate';

const SWAGGER_UI_DIR = path.dirname(require.resolve('swagger-ui-dist/package.json'));

// Relative URLs, so the page also works behind a path prefix: from /docs they resolve to /docs/assets/...
const PAGE = `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <title>Plant Store API reference</title>
    <link rel="icon" href="data:," />
    <link rel="stylesheet" href="docs/assets/swagger-ui.css" />
  </head>
  <body>
    <div id="swagger-ui"></div>
    <script src="docs/assets/swagger-ui-bundle.js"></script>
    <script src="docs/assets/docs.js"></script>
  </body>
</html>
`;

// validatorUrl: null keeps Swagger UI from sending the contract to validator.swagger.io.
const INITIALIZER = `window.ui = SwaggerUIBundle({
  url: 'openapi.json',
  dom_id: '#swagger-ui',
  docExpansion: 'full',
  defaultModelsExpandDepth: 2,
  defaultModelExpandDepth: 2,
  showCommonExtensions: true,
  validatorUrl: null,
});
`;

/** The page runs only its own files and talks only to its own origin (the contract, Try it out). */
const PAGE_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

type DocsAsset =
  | { readonly type: string; readonly file: string }
  | { readonly type: string; readonly text: string };

/** The files the page loads, by the names the contract's enum allows. */
const ASSETS: ReadonlyMap<string, DocsAsset> = new Map([
  ['swagger-ui.css', { type: 'text/css', file: path.join(SWAGGER_UI_DIR, 'swagger-ui.css') }],
  [
    'swagger-ui-bundle.js',
    { type: 'text/javascript', file: path.join(SWAGGER_UI_DIR, 'swagger-ui-bundle.js') },
  ],
  ['docs.js', { type: 'text/javascript', text: INITIALIZER }],
]);

/** An asset's bytes and their strong entity tag. */
interface LoadedAsset {
  readonly body: Buffer;
  readonly etag: string;
}

function load(asset: DocsAsset): Promise<LoadedAsset> {
  const read = 'text' in asset ? Promise.resolve(Buffer.from(asset.text)) : readFile(asset.file);
  return read.then((body) => ({
    body,
    etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`,
  }));
}

/** Handlers of the reference page: Swagger UI from the installed swagger-ui-dist, no CDN. */
export function createDocsHandlers(): Readonly<
  Record<Extract<OperationId, 'getDocs' | 'getDocsAsset'>, RequestHandler>
> {
  const loaded = new Map<string, Promise<LoadedAsset>>();
  return {
    getDocs(_req, res) {
      res.set('Content-Security-Policy', PAGE_POLICY).type('text/html').send(PAGE);
    },
    async getDocsAsset(_req, res) {
      const name = String(pathParameter(res, 'file'));
      const asset = ASSETS.get(name);
      // The validator has already refused names outside the contract's enum.
      if (asset === undefined) throw new Error(`The contract lists a docs asset ${name} we lack.`);
      // Read on first use and kept (about 1.9 MB in all): a service that never serves /docs pays
      // nothing. A failed read is not kept, so the next request tries again.
      let loading = loaded.get(name);
      if (loading === undefined) {
        loading = load(asset);
        loaded.set(name, loading);
        loading.catch(() => loaded.delete(name));
      }
      const { body, etag } = await loading;
      // res.send answers 304 when If-None-Match names this ETag (or is *): see the contract.
      res.set('Cache-Control', 'no-cache').set('ETag', etag).type(asset.type).send(body);
    },
  };
}
