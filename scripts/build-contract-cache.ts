/**
 * Part of `npm run build`: writes dist/contract-cache.json, the contract's JSON form keyed by the
 * SHA-256 of openapi.yaml, so that the service starts without parsing the YAML. A cache written
 * from another text of the file is ignored, so an edit without a build is never served stale.
 */
import path from 'node:path';
import { writeContractCache } from '../src/http/openapi-document';

writeContractCache(
  path.resolve(__dirname, '..', '..', 'openapi.yaml'),
  path.resolve(__dirname, '..', 'contract-cache.json'),
);
