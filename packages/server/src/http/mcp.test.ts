import type { AddressInfo } from "node:net";
import Fastify from "fastify";
import { afterEach, describe, expect, it } from "vitest";
import { installErrorHandling } from "./error-handler.ts";
import { registerMcp } from "./mcp.ts";
import { OwnRequests } from "./own-requests.ts";
import type { App, Services } from "./types.ts";

const apps: App[] = [];
afterEach(async () => {
  for (const app of apps.splice(0)) await app.close();
});

/** An app with only `/mcp`, whose MCP package is loaded by `load`. */
async function mcpOnly(load: Parameters<typeof registerMcp>[3]): Promise<string> {
  const app = Fastify() as unknown as App;
  apps.push(app);
  installErrorHandling(app);
  const services = { config: { mcpConfirmAboveUsd: undefined } } as unknown as Pick<Services, "config">;
  await registerMcp(app, services, new OwnRequests(), load);
  await app.listen({ port: 0, host: "127.0.0.1" });
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/mcp`;
}

describe("/mcp when its package cannot be loaded", () => {
  it("answers 500 in the API's shape at once (it hung until the request timeout), and the next request loads it again", async () => {
    let loads = 0;
    const url = await mcpOnly(async () => {
      loads += 1;
      if (loads === 1) throw new Error("Cannot find module '@svc/mcp'");
      return import("@svc/mcp");
    });
    const failed = await fetch(url, { method: "POST", signal: AbortSignal.timeout(30_000) });
    expect(failed.status).toBe(500);
    expect(((await failed.json()) as { error: unknown }).error).toMatchObject({ code: "InternalError" });
    // Loaded this time: the MCP handler answers (no key: 401), not the first failure again.
    const loaded = await fetch(url, { method: "POST", signal: AbortSignal.timeout(30_000) });
    expect(loaded.status).toBe(401);
    expect(loads).toBe(2);
  });
});
