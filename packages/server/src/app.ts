import { createServer, type RequestListener, type Server, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import fastJson from "fast-json-stringify";
import Fastify, { type FastifyBaseLogger, LogController } from "fastify";
import { validatorCompiler, type ZodTypeProvider } from "fastify-type-provider-zod";
import { z } from "zod";
import { registerConsole } from "./http/console.ts";
import {
  answerClientError,
  apiAnswerHeaders,
  BODY_LIMIT_BYTES,
  installErrorHandling,
  renderFrameworkError,
} from "./http/error-handler.ts";
import { installGuards } from "./http/guards.ts";
import { installHostCheck } from "./http/host-check.ts";
import { installIdempotency } from "./http/idempotency.ts";
import { registerMcp } from "./http/mcp.ts";
import { installOpenApi, registerDocsRoutes } from "./http/openapi.ts";
import { OwnRequests } from "./http/own-requests.ts";
import { installInputChecks } from "./http/request-input.ts";
import { registerRoutes } from "./http/routes/index.ts";
import type { App, Services } from "./http/types.ts";
import { newId } from "./internal/crypto.ts";

/**
 * Builds the HTTP application over already-opened services. Nothing listens until the caller says so.
 * @example
 * const app = await createApp(services, { logger: pino(loggerOptions("info")) });
 * await app.listen({ port: 8080 });
 */
export async function createApp(
  services: Services,
  options: { logger?: FastifyBaseLogger } = {},
): Promise<App> {
  const app = Fastify({
    ...(options.logger ? { loggerInstance: options.logger } : { logger: false }),
    bodyLimit: BODY_LIMIT_BYTES,
    serverFactory: (handler) => createHttpServer(handler, services.config.requestTimeoutMs),
    genReqId: () => newId("req"),
    logController: new LogController({ requestIdLogLabel: "requestId" }),
    // Only the listed proxies' X-Forwarded-For is believed; with none, the socket's address is the client's.
    trustProxy: services.config.trustProxy.length > 0 ? services.config.trustProxy : false,
    return503OnClosing: true,
    routerOptions: { maxParamLength: 200 },
    frameworkErrors: renderFrameworkError,
    clientErrorHandler: answerClientError,
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
    apiAnswerHeaders(reply);
  });
  app.addHook("onRoute", (route) => {
    // Public routes carry no security requirement in the OpenAPI document.
    if (route.config?.auth === "public") route.schema = { ...route.schema, security: [] };
  });
  installErrorHandling(app);
  installAnswerDrain(app);
  installHostCheck(app, services.config.allowedHosts);
  const ownRequests = new OwnRequests();
  installGuards(app, services, ownRequests);
  installInputChecks(app);
  installIdempotency(app, services);
  await installOpenApi(app);
  registerRoutes(app, services);
  await registerMcp(app, services, ownRequests);
  await registerDocsRoutes(app);
  await registerConsole(app);
  return app;
}

/**
 * How long a stopping service goes on writing the answers its handlers have given, to clients that have not
 * read them all: then their connections are cut.
 */
const STOPPING_ANSWER_DRAIN_MS = 5_000;

/**
 * Closing waits for every connection to end, and a client that stops reading its answer would hold the
 * service's stop (SIGTERM) for as long as it kept its socket. Once the app is closing, the connections of
 * answers still being written get {@link STOPPING_ANSWER_DRAIN_MS}, then are cut. (Node may have handed the
 * whole answer to the kernel, the response done, while the client reads none of it: the connection is what
 * is cut.) Handlers still at work are not cut: the stop waits for them, as the store must outlive them; an
 * answer they give later gets the same time.
 */
function installAnswerDrain(app: App): void {
  const answering = new Map<ServerResponse, Socket>();
  let closing = false;
  const cutLater = (socket: Socket) => setTimeout(() => socket.destroy(), STOPPING_ANSWER_DRAIN_MS).unref();
  app.addHook("onSend", async (_request, reply) => {
    const response = reply.raw;
    const socket = response.socket;
    if (!socket || answering.has(response)) return;
    answering.set(response, socket);
    response.once("close", () => answering.delete(response));
    if (closing) cutLater(socket);
  });
  app.addHook("preClose", async () => {
    closing = true;
    for (const socket of answering.values()) cutLater(socket);
  });
}

/**
 * The HTTP server under the app. A request whose headers and body have not all arrived within
 * `requestTimeoutMs` is answered 408 and its connection closed: with none (Fastify's default), requests that
 * never finish could hold every file descriptor the process has. Node looks for them a few times per
 * timeout (its default, every 30 s, would let one live up to twice as long). Idle keep-alive connections
 * last 72 s, as Fastify keeps them.
 */
function createHttpServer(handler: RequestListener, requestTimeoutMs: number): Server {
  const server = createServer(
    {
      requestTimeout: requestTimeoutMs,
      headersTimeout: Math.min(60_000, requestTimeoutMs),
      connectionsCheckingInterval: Math.min(30_000, Math.ceil(requestTimeoutMs / 4)),
    },
    handler,
  );
  server.keepAliveTimeout = 72_000;
  return server;
}
