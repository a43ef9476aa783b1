/**
 * `/mcp`: the MCP server (`@svc/mcp`) over streamable HTTP on the service's own port. Each request carries
 * its own API key; the MCP handler checks it by calling this service's REST API with it (through the SDK, over
 * loopback), so the MCP tools go through the very same authentication, roles, policy and limits as any client.
 * The package is loaded on the first request to `/mcp`: a service nobody asks for MCP never loads it.
 */
import type { AddressInfo } from "node:net";
import type { McpHttpHandler } from "@svc/mcp";
import type { OwnRequests } from "./own-requests.ts";
import type { App, Services } from "./types.ts";

/** The service's own base URL as its REST clients reach it (loopback when it listens on every address). */
function ownBaseUrl(app: App): string {
  const address = app.server.address() as AddressInfo;
  const host =
    address.address === "0.0.0.0" || address.address === "::"
      ? "127.0.0.1"
      : address.family === "IPv6"
        ? `[${address.address}]`
        : address.address;
  return `http://${host}:${address.port}/v1`;
}

/**
 * Registers `GET|POST|DELETE /mcp`; the handler's sessions end when the service closes. Its calls to `/v1`
 * are the service's own, made for the `/mcp` request's client: they count for that client's address. `load`
 * imports the MCP package (on the first request); if it fails, that request is a 500 and the next tries again.
 */
export async function registerMcp(
  app: App,
  services: Pick<Services, "config">,
  ownRequests: OwnRequests,
  load: () => Promise<typeof import("@svc/mcp")> = () => import("@svc/mcp"),
): Promise<void> {
  let handler: Promise<McpHttpHandler> | undefined;
  const mcp = (): Promise<McpHttpHandler> => {
    handler ??= load().then(
      ({ createMcpHttpHandler }) =>
        createMcpHttpHandler({
          baseUrl: () => ownBaseUrl(app),
          confirmAboveUsd: services.config.mcpConfirmAboveUsd,
          fetch: ownRequests.fetchFor(() => new URL(ownBaseUrl(app)).origin),
        }),
      (error: unknown) => {
        handler = undefined;
        throw error;
      },
    );
    return handler;
  };
  app.addHook("onClose", async () => {
    if (handler) await (await handler).close();
  });
  await app.register(async (scope) => {
    // The body goes to the MCP handler as text: it checks the key first, then parses the JSON-RPC message.
    scope.removeContentTypeParser("application/json");
    scope.addContentTypeParser("application/json", { parseAs: "string" }, (_request, body, done) =>
      done(null, body),
    );
    scope.route({
      method: ["GET", "POST", "DELETE"],
      url: "/mcp",
      // The MCP handler authenticates each request itself (401 without a valid key), with the service.
      config: { auth: "public" },
      schema: { hide: true },
      handler: async (request, reply) => {
        // Loaded before the reply is handed over: a failure is answered by the error handler, not left hanging.
        const endpoint = await mcp();
        // The response is written by the MCP transport: headers set on `reply` would not reach it.
        reply.raw.setHeader("x-request-id", request.id);
        reply.hijack();
        await ownRequests.actFor(request.ip, () =>
          endpoint.handle(request.raw, reply.raw, (request.body as string | undefined) ?? ""),
        );
      },
    });
  });
}
