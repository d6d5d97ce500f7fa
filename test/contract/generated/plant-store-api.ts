/* eslint-disable */
/* tslint:disable */
// @ts-nocheck
/*
 * ---------------------------------------------------------------
 * ## THIS FILE WAS GENERATED VIA SWAGGER-TYPESCRIPT-API        ##
 * ##                                                           ##
 * ## AUTHOR: acacode                                           ##
 * ## SOURCE: https://github.com/acacode/swagger-typescript-api ##
 * ---------------------------------------------------------------
 */

/**
 * The body of every error response. Clients must ignore properties they do not know, as in
 * every response body.
 */
export interface Error {
  /**
   * The HTTP status code of the response.
   * @format int32
   * @min 400
   * @max 599
   */
  error: number;
  /** What went wrong, for people; naming the offending field where there is one. */
  message: string;
}

/** The liveness probe's answer. */
export interface Health {
  status: "ok";
}

/** Every field of `Plant` plus a required `id`. Unknown properties are rejected. */
export type NewPlant = PlantFields & {
  /**
   * The plant's id, any int64, chosen by the caller.
   * @format int64
   */
  id: number;
};

/**
 * A stored plant. Clients must ignore properties they do not know: a later minor version may
 * add some (see the project README's versioning policy).
 */
export type Plant = PlantFields;

/** The fields a plant has; shared by `Plant` and `NewPlant`. */
export interface PlantFields {
  /**
   * The plant's name, 1 to 255 Unicode code points, stored and answered exactly. It may not
   * contain U+0000, which PostgreSQL text cannot hold.
   * @minLength 1
   * @maxLength 255
   * @pattern ^[^\x00]*$
   */
  name: string;
  /**
   * An optional tag, 1 to 255 Unicode code points, without U+0000.
   * @minLength 1
   * @maxLength 255
   * @pattern ^[^\x00]*$
   */
  tag?: string;
}

/** The readiness probe's answer. */
export interface Readiness {
  status: "ready";
}

export type QueryParamsType = Record<string | number, any>;
export type ResponseFormat = keyof Omit<Body, "body" | "bodyUsed">;

export interface FullRequestParams extends Omit<RequestInit, "body"> {
  /** set parameter to `true` for call `securityWorker` for this request */
  secure?: boolean;
  /** request path */
  path: string;
  /** content type of request body */
  type?: ContentType;
  /** query params */
  query?: QueryParamsType;
  /** format of response (i.e. response.json() -> format: "json") */
  format?: ResponseFormat;
  /** request body */
  body?: unknown;
  /** base url */
  baseUrl?: string;
  /** request cancellation token */
  cancelToken?: CancelToken;
}

export type RequestParams = Omit<
  FullRequestParams,
  "body" | "method" | "query" | "path"
>;

export interface ApiConfig<SecurityDataType = unknown> {
  baseUrl?: string;
  baseApiParams?: Omit<RequestParams, "baseUrl" | "cancelToken" | "signal">;
  securityWorker?: (
    securityData: SecurityDataType | null,
  ) => Promise<RequestParams | void> | RequestParams | void;
  customFetch?: typeof fetch;
}

export interface HttpResponse<D extends unknown, E extends unknown = unknown>
  extends Response {
  data: D;
  error: E;
}

type CancelToken = Symbol | string | number;

export enum ContentType {
  Json = "application/json",
  JsonApi = "application/vnd.api+json",
  FormData = "multipart/form-data",
  UrlEncoded = "application/x-www-form-urlencoded",
  Text = "text/plain",
}

export class HttpClient<SecurityDataType = unknown> {
  public baseUrl: string = "/";
  private securityData: SecurityDataType | null = null;
  private securityWorker?: ApiConfig<SecurityDataType>["securityWorker"];
  private abortControllers = new Map<CancelToken, AbortController>();
  private customFetch = (...fetchParams: Parameters<typeof fetch>) =>
    fetch(...fetchParams);

  private baseApiParams: RequestParams = {
    credentials: "same-origin",
    headers: {},
    redirect: "follow",
    referrerPolicy: "no-referrer",
  };

  constructor(apiConfig: ApiConfig<SecurityDataType> = {}) {
    Object.assign(this, apiConfig);
  }

  public setSecurityData = (data: SecurityDataType | null) => {
    this.securityData = data;
  };

  protected encodeQueryParam(key: string, value: any) {
    const encodedKey = encodeURIComponent(key);
    return `${encodedKey}=${encodeURIComponent(typeof value === "number" ? value : `${value}`)}`;
  }

  protected addQueryParam(query: QueryParamsType, key: string) {
    return this.encodeQueryParam(key, query[key]);
  }

  protected addArrayQueryParam(query: QueryParamsType, key: string) {
    const value = query[key];
    return value.map((v: any) => this.encodeQueryParam(key, v)).join("&");
  }

  protected toQueryString(rawQuery?: QueryParamsType): string {
    const query = rawQuery || {};
    const keys = Object.keys(query).filter(
      (key) => "undefined" !== typeof query[key],
    );
    return keys
      .map((key) =>
        Array.isArray(query[key])
          ? this.addArrayQueryParam(query, key)
          : this.addQueryParam(query, key),
      )
      .join("&");
  }

  protected addQueryParams(rawQuery?: QueryParamsType): string {
    const queryString = this.toQueryString(rawQuery);
    return queryString ? `?${queryString}` : "";
  }

  private contentFormatters: Record<ContentType, (input: any) => any> = {
    [ContentType.Json]: (input: any) =>
      input !== null && (typeof input === "object" || typeof input === "string")
        ? JSON.stringify(input)
        : input,
    [ContentType.JsonApi]: (input: any) =>
      input !== null && (typeof input === "object" || typeof input === "string")
        ? JSON.stringify(input)
        : input,
    [ContentType.Text]: (input: any) =>
      input !== null && typeof input !== "string"
        ? JSON.stringify(input)
        : input,
    [ContentType.FormData]: (input: any) => {
      if (input instanceof FormData) {
        return input;
      }

      return Object.keys(input || {}).reduce((formData, key) => {
        const property = input[key];
        formData.append(
          key,
          property instanceof Blob
            ? property
            : typeof property === "object" && property !== null
              ? JSON.stringify(property)
              : `${property}`,
        );
        return formData;
      }, new FormData());
    },
    [ContentType.UrlEncoded]: (input: any) => this.toQueryString(input),
  };

  protected mergeRequestParams(
    params1: RequestParams,
    params2?: RequestParams,
  ): RequestParams {
    return {
      ...this.baseApiParams,
      ...params1,
      ...(params2 || {}),
      headers: {
        ...(this.baseApiParams.headers || {}),
        ...(params1.headers || {}),
        ...((params2 && params2.headers) || {}),
      },
    };
  }

  protected createAbortSignal = (
    cancelToken: CancelToken,
  ): AbortSignal | undefined => {
    if (this.abortControllers.has(cancelToken)) {
      const abortController = this.abortControllers.get(cancelToken);
      if (abortController) {
        return abortController.signal;
      }
      return void 0;
    }

    const abortController = new AbortController();
    this.abortControllers.set(cancelToken, abortController);
    return abortController.signal;
  };

  public abortRequest = (cancelToken: CancelToken) => {
    const abortController = this.abortControllers.get(cancelToken);

    if (abortController) {
      abortController.abort();
      this.abortControllers.delete(cancelToken);
    }
  };

  public request = async <T = any, E = any>({
    body,
    secure,
    path,
    type,
    query,
    format,
    baseUrl,
    cancelToken,
    ...params
  }: FullRequestParams): Promise<HttpResponse<T, E>> => {
    const secureParams =
      ((typeof secure === "boolean" ? secure : this.baseApiParams.secure) &&
        this.securityWorker &&
        (await this.securityWorker(this.securityData))) ||
      {};
    const requestParams = this.mergeRequestParams(params, secureParams);
    const queryString = query && this.toQueryString(query);
    const payloadFormatter = this.contentFormatters[type || ContentType.Json];
    const responseFormat = format || requestParams.format;

    return this.customFetch(
      `${baseUrl || this.baseUrl || ""}${path}${queryString ? `?${queryString}` : ""}`,
      {
        ...requestParams,
        headers: {
          ...(requestParams.headers || {}),
          ...(type && type !== ContentType.FormData
            ? { "Content-Type": type }
            : {}),
        },
        signal:
          (cancelToken
            ? this.createAbortSignal(cancelToken)
            : requestParams.signal) || null,
        body:
          typeof body === "undefined" || body === null
            ? null
            : payloadFormatter(body),
      },
    ).then(async (response) => {
      const r = response as HttpResponse<T, E>;
      r.data = null as unknown as T;
      r.error = null as unknown as E;

      const responseToParse = responseFormat ? response.clone() : response;
      const data = !responseFormat
        ? r
        : await responseToParse[responseFormat]()
            .then((data) => {
              if (r.ok) {
                r.data = data;
              } else {
                r.error = data;
              }
              return r;
            })
            .catch((e) => {
              r.error = e;
              return r;
            });

      if (cancelToken) {
        this.abortControllers.delete(cancelToken);
      }

      if (!response.ok) throw data;
      return data;
    });
  };
}

/**
 * @title Plant Store
 * @version 1.3.0
 * @license MIT
 * @baseUrl /
 * @contact The plant store maintainers
 *
 * The plant store keeps plants, each identified by a caller-chosen 64-bit integer id.
 *
 * Rules that hold for every operation:
 *
 * - Every request to `/plants` needs `Authorization: Bearer <token>`. Tokens are given out
 *   by the operators of the service (see the project README). A token in the query string
 *   or in the body is never accepted (RFC 6750 section 5.3).
 * - Checks run in a fixed order, so each request gets one predictable answer: the request
 *   line and `Host` (400: another HTTP version than 1.x, HTTP/1.1 without `Host`, a
 *   `#fragment`), the route (404, 405), then authentication (429 after repeated failures, 400
 *   for a malformed `Authorization` header, 401), then the media type (415), the body size
 *   (413), then the body and parameters (400), and last the stored state (404, 409). Requests
 *   whose headers are too large (431) or too slow (408), or that cannot be parsed as HTTP/1.1
 *   (400), are refused before all of that.
 * - Every response carries `X-Request-Id`: the caller's own, when it is 1 to 128 characters
 *   of `A-Z a-z 0-9 . _ : -`, or a new UUID. Quote it when reporting a problem.
 * - Every response carries `Cache-Control: no-store`, so that no cache keeps it, but the files
 *   of `/docs/assets/{file}`, which carry `no-cache` with an `ETag`.
 * - Every error answers with `Content-Type: application/json` and the `Error` body, whose
 *   `error` field equals the HTTP status code.
 * - Ids are exact over the whole int64 range, from -9223372036854775808 to
 *   9223372036854775807, in bodies and in paths. Clients in languages whose default number
 *   type is a double (JavaScript, for instance) must keep ids above 2^53 in a lossless type.
 * - A JSON number with an integral value (`1.0`, `1e2`) is an integer, as JSON Schema says.
 *   Lengths count Unicode code points. Duplicate keys in a JSON object are rejected.
 */
export class Api<
  SecurityDataType extends unknown,
> extends HttpClient<SecurityDataType> {
  plants = {
    /**
     * @description Stores a new plant under the id given in the body and answers with the stored plant, without its id. The `tag` field is answered only when it was sent. The body must be `application/json` (a `charset=utf-8` parameter is allowed) and at most 64 KiB unless the operators configured another limit. An id that is already taken answers 409 and changes nothing; an id may be used again once its plant has been deleted.
     *
     * @tags plants
     * @name CreatePlant
     * @summary Create a plant
     * @request POST:/plants
     * @secure
     */
    createPlant: (data: NewPlant, params: RequestParams = {}) =>
      this.request<Plant, Error>({
        path: `/plants`,
        method: "POST",
        body: data,
        secure: true,
        type: ContentType.Json,
        format: "json",
        ...params,
      }),

    /**
     * @description Removes the plant with the given id. The id is a canonical decimal int64: an optional minus sign, no plus sign and no leading zeros; anything else answers 400. The request takes no body: one sent with it is ignored, once it has arrived whole, and one longer than a request body may be (64 KiB by default) answers 413 and deletes nothing.
     *
     * @tags plants
     * @name DeletePlant
     * @summary Delete a plant
     * @request DELETE:/plants/{id}
     * @secure
     */
    deletePlant: (id: number, params: RequestParams = {}) =>
      this.request<void, Error>({
        path: `/plants/${id}`,
        method: "DELETE",
        secure: true,
        ...params,
      }),
  };
  healthz = {
    /**
     * @description Answers 200 while the process is able to serve requests. It does not touch the store.
     *
     * @tags service
     * @name GetHealth
     * @summary Liveness probe
     * @request GET:/healthz
     */
    getHealth: (params: RequestParams = {}) =>
      this.request<Health, Error>({
        path: `/healthz`,
        method: "GET",
        format: "json",
        ...params,
      }),
  };
  readyz = {
    /**
     * @description Answers 200 when the store answers a trivial query, and 503 while it does not (for example while PostgreSQL is unreachable), after this instance's store stopped writing safely, and from the moment a shutdown begins (`The service is shutting down.`). A load balancer sends traffic only to instances that answer 200 here.
     *
     * @tags service
     * @name GetReadiness
     * @summary Readiness probe
     * @request GET:/readyz
     */
    getReadiness: (params: RequestParams = {}) =>
      this.request<Readiness, Error>({
        path: `/readyz`,
        method: "GET",
        format: "json",
        ...params,
      }),
  };
  openapiYaml = {
    /**
     * @description The file this service was built from, byte for byte.
     *
     * @tags service
     * @name GetOpenApiYaml
     * @summary This contract, as YAML
     * @request GET:/openapi.yaml
     */
    getOpenApiYaml: (params: RequestParams = {}) =>
      this.request<string, Error>({
        path: `/openapi.yaml`,
        method: "GET",
        ...params,
      }),
  };
  openapiJson = {
    /**
     * @description The same document as `/openapi.yaml`, converted to JSON.
     *
     * @tags service
     * @name GetOpenApiJson
     * @summary This contract, as JSON
     * @request GET:/openapi.json
     */
    getOpenApiJson: (params: RequestParams = {}) =>
      this.request<object, Error>({
        path: `/openapi.json`,
        method: "GET",
        format: "json",
        ...params,
      }),
  };
  docs = {
    /**
     * @description An HTML page that renders this contract with Swagger UI, served by the service itself from its npm package: it needs no internet. The page loads its script and style from `/docs/assets/{file}` and the contract from `/openapi.json`.
     *
     * @tags service
     * @name GetDocs
     * @summary This contract, as a reference page
     * @request GET:/docs
     */
    getDocs: (params: RequestParams = {}) =>
      this.request<string, Error>({
        path: `/docs`,
        method: "GET",
        ...params,
      }),

    /**
     * @description One of the few static files `/docs` loads; any other name answers 400.
     *
     * @tags service
     * @name GetDocsAsset
     * @summary A script or style sheet of the reference page
     * @request GET:/docs/assets/{file}
     */
    getDocsAsset: (
      file: "swagger-ui.css" | "swagger-ui-bundle.js" | "docs.js",
      params: RequestParams = {},
    ) =>
      this.request<string, Error>({
        path: `/docs/assets/${file}`,
        method: "GET",
        ...params,
      }),
  };
}
