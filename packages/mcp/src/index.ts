/**
 * `@svc/mcp`: the Model Context Protocol server of the Svc wallet service, on `@svc/sdk`. `svc-mcp` serves it
 * over stdio; {@link createMcpHttpHandler} over streamable HTTP (the service mounts it at `/mcp`).
 * @packageDocumentation
 */
export { clientFor, configFromEnv, confirmAboveFromEnv, type McpConfig } from "./config.ts";
export {
  createMcpHttpHandler,
  type McpHttpHandler,
  type McpHttpOptions,
} from "./http.ts";
export { servesTestNetworks, type ToolSet, toolSetOf } from "./role.ts";
export {
  ADMIN_TOOLS,
  AGENT_TOOLS,
  createSvcMcpServer,
  READ_TOOLS,
  type SvcMcpServerOptions,
} from "./server.ts";
