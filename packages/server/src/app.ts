import fastJson from "fast-json-stringify";
import Fastify, { type FastifyBaseLogger, LogController } from "fastify";
import { validatorCompiler, type ZodTypeProvider } from "fastify-type-provider-zod";
import pino, { type LoggerOptions } from "pino";
import { z } from "zod";
import { registerConsole } from "./http/console.ts";
import { BODY_LIMIT_BYTES, installErrorHandling, renderFrameworkError } from "./http/error-handler.ts";
import { installGuards } from "./http/guards.ts";
import { installIdempotency } from "./http/idempotency.ts";
import { registerMcp } from "./http/mcp.ts";
import { installOpenApi, registerDocsRoutes } from "./http/openapi.ts";
import { installInputChecks } from "./http/request-input.ts";
import { registerRoutes } from "./http/routes/index.ts";
import type { App, Services } from "./http/types.ts";
import { newId } from "./internal/crypto.ts";

/**
 * How the service logs: the level, the fields that may hold a secret (written `[Redacted]`), and errors as
 * pino writes them but with every failed query in their chain cut down to its statement (see
 * {@link withoutQueryParameters}).
 * @example const logger = pino(loggerOptions("info"), pino.destination(1));
 */
export function loggerOptions(level: string): LoggerOptions {
  return {
    level,
    redact: { paths: REDACTED_LOG_PATHS, censor: "[Redacted]" },
    serializers: {
      err: (error: unknown) => pino.stdSerializers.err(withoutQueryParameters(error) as Error),
    },
  };
}

/**
 * An error fit for the log. A failed query's error carries its parameters, in its message and beside it (a
 * password hash, an API key hash, a stored response); anywhere in the chain, it is replaced by an error that
 * names the statement and the driver's error (its type, message and code) and nothing of the values.
 */
function withoutQueryParameters(error: unknown, depth = 0): unknown {
  if (!(error instanceof Error) || depth > 8) return error;
  const cause: unknown = error.cause;
  if ("query" in error && "params" in error) {
    const safe = new Error(`Failed query: ${String(error.query)}`);
    safe.name = error.name;
    if (cause instanceof Error) {
      const code = (cause as { code?: unknown }).code;
      // pino writes a cause into its error's message and stack: the code goes into the cause's message.
      const driver = new Error(
        code === undefined ? cause.message : `${cause.message} (code ${String(code)})`,
      );
      driver.name = cause.name;
      safe.cause = driver;
    }
    return safe;
  }
  const safeCause = withoutQueryParameters(cause, depth + 1);
  if (safeCause === cause) return error;
  const copy = Object.assign(Object.create(Object.getPrototypeOf(error)) as Error, error);
  copy.message = error.message;
  if (error.stack !== undefined) copy.stack = error.stack;
  copy.cause = safeCause;
  return copy;
}

/** Log fields that may hold a secret; pino writes `[Redacted]` in their place. */
const REDACTED_LOG_PATHS = [
  "req.headers.authorization",
  "req.headers.cookie",
  "headers.authorization",
  "*.authorization",
  "password",
  "*.password",
  "key",
  "*.key",
  "accessToken",
  "*.accessToken",
  "privateKey",
  "*.privateKey",
];

/**
 * Builds the HTTP application over already-opened services. Nothing listens until the caller says so.
 * @example
 * const app = await createApp(services, { logger: pino() });
 * await app.listen({ port: 8080 });
 */
export async function createApp(
  services: Services,
  options: { logger?: FastifyBaseLogger } = {},
): Promise<App> {
  const app = Fastify({
    ...(options.logger ? { loggerInstance: options.logger } : { logger: false }),
    bodyLimit: BODY_LIMIT_BYTES,
    genReqId: () => newId("req"),
    logController: new LogController({ requestIdLogLabel: "requestId" }),
    // Only the listed proxies' X-Forwarded-For is believed; with none, the socket's address is the client's.
    trustProxy: services.config.trustProxy.length > 0 ? services.config.trustProxy : false,
    return503OnClosing: true,
    routerOptions: { maxParamLength: 200 },
    frameworkErrors: renderFrameworkError,
  }).withTypeProvider<ZodTypeProvider>();

  app.setValidatorCompiler(validatorCompiler);
  // Responses are written by fast-json-stringify from the JSON Schema of each route's zod response schema:
  // only the declared fields go out, and it is several times faster than validating every reply with zod.
  app.setSerializerCompiler(({ schema }) =>
    fastJson(
      z.toJSONSchema(schema as z.ZodType, {
        io: "output",
        unrepresentable: "any",
        reused: "inline",
      }) as object,
    ),
  );
  app.addHook("onRequest", async (request, reply) => {
    reply.header("x-request-id", request.id);
  });
  app.addHook("onRoute", (route) => {
    // Public routes carry no security requirement in the OpenAPI document.
    if (route.config?.auth === "public") route.schema = { ...route.schema, security: [] };
  });
  installErrorHandling(app);
  installGuards(app, services);
  installInputChecks(app);
  installIdempotency(app, services);
  await installOpenApi(app);
  registerRoutes(app, services);
  await registerMcp(app, services);
  await registerDocsRoutes(app);
  await registerConsole(app);
  return app;
}
