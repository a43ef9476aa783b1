import swagger from "@fastify/swagger";
import swaggerUi from "@fastify/swagger-ui";
import type { RouteOptions } from "fastify";
import { jsonSchemaTransform, jsonSchemaTransformObject } from "fastify-type-provider-zod";
import { errorResponses } from "./schemas.ts";
import type { App } from "./types.ts";

/** Where the documentation UI is served; every path below it is public (see guards.ts). */
export const DOCS_PREFIX = "/docs";

/**
 * The documentation UI's Content-Security-Policy: everything from the service itself, nothing from anywhere
 * else (no CDN, fonts or analytics can load even if a script asked for them); `data:` only for the logo.
 */
export const DOCS_CSP = [
  "default-src 'none'",
  "base-uri 'none'",
  "connect-src 'self'",
  "font-src 'self'",
  "form-action 'none'",
  "frame-ancestors 'none'",
  "img-src 'self' data:",
  "object-src 'none'",
  "script-src 'self'",
  "script-src-attr 'none'",
  "style-src 'self'",
].join("; ");

const BODY_METHODS = new Set(["POST", "PUT", "PATCH", "DELETE"]);

/**
 * Refuses, at registration, a documented route without an `operationId`, and adds to its responses those
 * the service's hooks give wherever they run, so that no route's document forgets them: 400 (a malformed
 * path), 429 and 500 on every route, 401 where a credential is needed, 413 and 415 where a body is read.
 */
function completeRouteSchema(route: RouteOptions): void {
  const schema = route.schema;
  if (!schema || schema.hide) return;
  if (!schema.operationId) throw new Error(`route ${route.method} ${route.url} declares no operationId`);
  const readsBody = [route.method].flat().some((method) => BODY_METHODS.has(method));
  const common = errorResponses(
    400,
    429,
    500,
    ...(route.config?.auth === "public" ? [] : [401]),
    ...(readsBody ? [413, 415] : []),
  );
  route.schema = { ...schema, response: { ...common, ...(schema.response as object) } };
}

/** A route's schemas as OpenAPI: zod's JSON Schema, with a 204 declared as what it is, no body. */
const documentRoute: typeof jsonSchemaTransform = (route) => {
  const documented = jsonSchemaTransform(route);
  const responses = documented.schema?.response as Record<string, { description?: string }> | undefined;
  // zod's z.null() is a nullable string in OpenAPI 3.0, which would give a 204 a body.
  const empty = responses?.["204"];
  if (responses && empty) responses["204"] = { type: "null", description: empty.description } as never;
  return documented;
};

type Json = Record<string, unknown>;
const COMPONENT_REF = "#/components/schemas/";

/** The component names a value's `$ref`s point to. */
function referencedIn(value: unknown, into: Set<string>): void {
  JSON.stringify(value, (key, inner: unknown) => {
    if (key === "$ref" && typeof inner === "string" && inner.startsWith(COMPONENT_REF))
      into.add(inner.slice(COMPONENT_REF.length));
    return inner;
  });
}

/**
 * One component per shape. The zod provider emits every registered shape twice (as read and as written,
 * the second named `…Input`) whether used or not; this keeps the components some operation reaches, and
 * names a shape only requests use (`PolicyChangeInput`) by its own name.
 */
function oneComponentPerShape(document: Json): Json {
  const components = (document.components ?? {}) as Json;
  const all = (components.schemas ?? {}) as Record<string, unknown>;
  const used = new Set<string>();
  referencedIn(document.paths, used);
  for (let size = -1; size !== used.size; ) {
    size = used.size;
    for (const name of [...used]) referencedIn(all[name], used);
  }
  const renamed = new Map<string, string>();
  for (const name of used) {
    const shape = name.replace(/Input$/, "");
    if (shape !== name && !used.has(shape)) renamed.set(name, shape);
  }
  const schemas = Object.fromEntries([...used].sort().map((name) => [renamed.get(name) ?? name, all[name]]));
  return JSON.parse(JSON.stringify({ ...document, components: { ...components, schemas } }), (key, value) => {
    if (key !== "$ref" || typeof value !== "string" || !value.startsWith(COMPONENT_REF)) return value;
    const name = value.slice(COMPONENT_REF.length);
    return `${COMPONENT_REF}${renamed.get(name) ?? name}`;
  });
}

/** Registers the OpenAPI generator; must run before the routes are added so it sees them all. */
export async function installOpenApi(app: App): Promise<void> {
  app.addHook("onRoute", completeRouteSchema);
  await app.register(swagger, {
    openapi: {
      openapi: "3.0.3",
      info: {
        title: "Svc wallet service",
        version: "1.0.0",
        description:
          "Wallets for programmatic agents. Authenticate with `Authorization: Bearer <API key or access token>`. Every error answers the `Error` shape.",
      },
      components: { securitySchemes: { bearer: { type: "http", scheme: "bearer" } } },
      security: [{ bearer: [] }],
    },
    transform: documentRoute,
    transformObject: (document) => oneComponentPerShape(jsonSchemaTransformObject(document) as Json) as never,
  });
}

/**
 * Adds `GET /v1/openapi.json` and the documentation UI under `/docs` (Swagger UI, served from the package
 * with its assets: no CDN), both public.
 */
export async function registerDocsRoutes(app: App): Promise<void> {
  app.get("/v1/openapi.json", { config: { auth: "public" }, schema: { hide: true } }, async () =>
    app.swagger(),
  );
  await app.register(swaggerUi, {
    routePrefix: DOCS_PREFIX,
    staticCSP: DOCS_CSP,
    theme: { title: "Svc wallet service API" },
    uiHooks: {
      // Swagger UI's /static/index.html sends the browser to the page by replacing the end of its own URL:
      // with a query after it, nothing matched and it sent the browser to itself, until the browser gave up.
      // The page itself, reached with a query, fetched its document from its own URL with the query in it
      // (the page again, not the document): it is reached without one (its deep links are in the fragment).
      onRequest: async (request, reply) => {
        const route = request.routeOptions.url;
        const page = route === DOCS_PREFIX || route === `${DOCS_PREFIX}/`;
        if (route === `${DOCS_PREFIX}/static/index.html` || (page && request.url.includes("?")))
          return reply.redirect(`${DOCS_PREFIX}/`);
      },
    },
    // The layout without Swagger's top bar: its logo is an SVG with an inline <style>, which the CSP
    // refuses (an error in the browser's console on every visit), and its box loads a document from any URL
    // typed in; the page documents this service alone.
    uiConfig: { docExpansion: "list", defaultModelsExpandDepth: 1, deepLinking: true, layout: "BaseLayout" },
  });
}
