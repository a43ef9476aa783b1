/**
 * The streamable HTTP endpoint's own error answers, mounted on a bare `node:http` server (no service, no
 * chains): each has the service's error shape with the request's id, the same as its `X-Request-Id`.
 * test/http.test.ts covers them on the service's own `/mcp`.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { ServiceErrorBody } from "@svc/sdk";
import { afterEach, describe, expect, it } from "vitest";
import { createMcpHttpHandler, type McpHttpOptions } from "./http.ts";

const servers: Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

/** Serves the handler; `requestId` plays the mounting service, which names each request first. */
async function mount(
  options: McpHttpOptions,
  requestId?: string,
): Promise<{ url: string; faults: unknown[] }> {
  const mcp = createMcpHttpHandler(options);
  const faults: unknown[] = [];
  const server = createServer((request, response) => {
    if (requestId !== undefined) response.setHeader("x-request-id", requestId);
    mcp.handle(request, response).catch((error: unknown) => faults.push(error));
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`, faults };
}

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** An initialize request; one left unanswered fails the test after 10 s rather than hanging it. */
const post = (url: string, headers: Record<string, string> = {}) =>
  fetch(url, {
    method: "POST",
    signal: AbortSignal.timeout(10_000),
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      ...headers,
    },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: {} }),
  });

async function errorOf(response: Response): Promise<ServiceErrorBody["error"]> {
  const body = (await response.json()) as ServiceErrorBody;
  expect(Object.keys(body)).toEqual(["error"]);
  expect(body.error.requestId).toBe(response.headers.get("x-request-id"));
  return body.error;
}

describe("createMcpHttpHandler's error answers", () => {
  it("carry the mounting service's request id: the X-Request-Id it set", async () => {
    const { url } = await mount({ baseUrl: "http://127.0.0.1:1/v1" }, "req_FromTheService1");
    const none = await post(url);
    expect(none.status).toBe(401);
    expect(none.headers.get("x-request-id")).toBe("req_FromTheService1");
    expect(await errorOf(none)).toEqual({
      code: "Unauthorized",
      message: expect.stringContaining("Authorization: Bearer"),
      requestId: "req_FromTheService1",
      reason: "missing_credentials",
    });
  });

  it("mounted without a request id, name the request themselves, in the header and the body", async () => {
    const { url } = await mount({ baseUrl: "http://127.0.0.1:1/v1" });
    const first = await post(url, { authorization: "Basic dXNlcjpwYXNz" });
    expect(first.status).toBe(401);
    expect(first.headers.get("www-authenticate")).toMatch(/^Bearer/);
    const error = await errorOf(first);
    expect(error).toMatchObject({ code: "Unauthorized", reason: "invalid_credentials" });
    expect(error.requestId).toMatch(/^req_[\w-]+$/);
    const second = await errorOf(await post(url));
    expect(second.requestId).not.toBe(error.requestId);
  });

  it("a service that does not answer: 502 service_unavailable", async () => {
    const { url } = await mount(
      { baseUrl: `http://127.0.0.1:${await closedPort()}/v1` },
      "req_Unreachable001",
    );
    const response = await post(url, { authorization: "Bearer svc_whatever" });
    expect(response.status).toBe(502);
    expect(await errorOf(response)).toMatchObject({
      code: "InternalError",
      reason: "service_unavailable",
      requestId: "req_Unreachable001",
    });
  });

  it("a fault answers 500 with the request id (not a hanging request) and is rethrown to the mounter", async () => {
    const { url, faults } = await mount({ baseUrl: "not a url" }, "req_Misconfigured1");
    const response = await post(url, { authorization: "Bearer svc_whatever" });
    expect(response.status).toBe(500);
    expect(await errorOf(response)).toEqual({
      code: "InternalError",
      message: "Internal error; the request id locates it in the log",
      requestId: "req_Misconfigured1",
    });
    expect(faults).toHaveLength(1);
    expect(String(faults[0])).toContain("baseUrl");
  });
});
