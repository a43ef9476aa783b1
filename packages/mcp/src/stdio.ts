/**
 * `svc-mcp`: the MCP server over stdio, for one credential (`SVC_API_KEY`). Its tools are chosen once, at
 * start, from the credential's role. Failures to start print one line to stderr and exit 1.
 */
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { SvcError } from "@svc/sdk";
import { clientFor, configFromEnv } from "./config.ts";
import { servesTestNetworks, toolSetOf } from "./role.ts";
import { createSvcMcpServer } from "./server.ts";

try {
  const config = configFromEnv(process.env);
  const svc = clientFor(config);
  const toolSet = await toolSetOf(svc);
  const server = createSvcMcpServer({
    svc,
    toolSet,
    faucet: await servesTestNetworks(svc),
    confirmAboveUsd: config.confirmAboveUsd,
  });
  await server.connect(new StdioServerTransport());
} catch (error) {
  const message =
    error instanceof SvcError
      ? `svc-mcp: the service refused the credential or could not be reached: ${error.message} (${error.code}${error.reason ? `, ${error.reason}` : ""})`
      : `svc-mcp: ${error instanceof Error ? error.message : String(error)}`;
  process.stderr.write(`${message}\n`);
  process.exit(1);
}
