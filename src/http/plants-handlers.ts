import type { RequestHandler } from 'express';
import type { PlantsService } from '../service/plants-service';
import { HttpProblem, PATH_ID } from './http-error';
import {
  CANONICAL_INT64_RULE,
  INT64_MAX,
  INT64_MIN,
  int64FromJsonNumber,
  parseCanonicalInt64,
} from './int64';
import { parsedBody } from './json-body';
import type { Body, Json, OperationId } from './openapi-types';
import { pathParameter } from './route-gate';

/** The exact id from the body's source text: the validator only sees a JS number, which rounds above 2^53. */
function bodyId(raw: string | undefined): bigint {
  const id = raw === undefined ? undefined : int64FromJsonNumber(raw);
  if (id?.ok === true) return id.value;
  // Worded as the validator words its own type errors ("must be integer").
  const problem =
    id?.reason === 'out-of-range'
      ? `must be between ${INT64_MIN} and ${INT64_MAX}`
      : 'must be integer';
  throw new HttpProblem(400, `request/body/id ${problem}`);
}

function pathId(segment: string | undefined): bigint {
  const id = segment === undefined ? undefined : parseCanonicalInt64(segment);
  if (id === undefined) throw new HttpProblem(400, `${PATH_ID} ${CANONICAL_INT64_RULE}`);
  return id;
}

/** Thin handlers for the plant operations: read the exact input, call the service, answer. */
export function createPlantsHandlers(
  plants: PlantsService,
): Readonly<Record<Extract<OperationId, 'createPlant' | 'deletePlant'>, RequestHandler>> {
  return {
    async createPlant(req, res) {
      const body = req.body as Body<'createPlant'>;
      const id = bodyId(parsedBody(res)?.numberSource(body, 'id'));
      const plant = await plants.create({
        id,
        name: body.name,
        ...(body.tag === undefined ? {} : { tag: body.tag }),
      });
      res.status(200).json(plant satisfies Json<'createPlant', 200>);
    },
    async deletePlant(_req, res) {
      await plants.delete(pathId(pathParameter(res, 'id')));
      res.status(204).end();
    },
  };
}
