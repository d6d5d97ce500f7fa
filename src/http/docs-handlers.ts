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

/** Handlers of the reference page: Swagger UI from the installed swagger-ui-dist, no CDN. */
export function createDocsHandlers(): Readonly<
  Record<Extract<OperationId, 'getDocs' | 'getDocsAsset'>, RequestHandler>
> {
  return {
    getDocs(_req, res) {
      res.set('Content-Security-Policy', PAGE_POLICY).type('text/html').send(PAGE);
    },
    getDocsAsset(_req, res) {
      const name = String(pathParameter(res, 'file'));
      const asset = ASSETS.get(name);
      // The validator has already refused names outside the contract's enum.
      if (asset === undefined) throw new Error(`The contract lists a docs asset ${name} we lack.`);
      res.set('Cache-Control', 'no-cache').type(asset.type);
      if ('text' in asset) res.send(asset.text);
      else res.sendFile(asset.file, { etag: false });
    },
  };
}
