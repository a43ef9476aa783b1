import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestServer, seedAccount, type TestServer } from "./support/test-server.ts";

let server: TestServer;
beforeAll(async () => {
  server = await createTestServer();
});
afterAll(() => server.close());

describe("operability", () => {
  it("GET /healthz answers 200 without a credential while the store answers", async () => {
    const response = await server.api.get("/healthz");
    expect(response.status).toBe(200);
    expect(response.body).toEqual({ status: "ok", store: server.service.store.kind });
  });

  it("serves an OpenAPI 3 document generated from the route schemas", async () => {
    const response = await server.api.get("/v1/openapi.json");
    expect(response.status).toBe(200);
    const doc = response.body;
    expect(doc.openapi).toMatch(/^3\./);
    const operations = Object.entries(doc.paths as Record<string, Record<string, unknown>>).flatMap(
      ([path, ops]) => Object.keys(ops).map((method) => `${method.toUpperCase()} ${path}`),
    );
    for (const expected of [
      "POST /v1/auth/register",
      "POST /v1/auth/login",
      "GET /v1/api-keys",
      "POST /v1/api-keys",
      "DELETE /v1/api-keys/{id}",
      "GET /v1/wallets",
      "POST /v1/wallets",
      "GET /v1/wallets/{id}",
      "DELETE /v1/wallets/{id}",
      "GET /v1/wallets/{id}/transactions",
      "GET /healthz",
    ]) {
      expect(operations).toContain(expected);
    }
    const register = doc.paths["/v1/auth/register"].post;
    expect(register.security).toEqual([]);
    expect(register.requestBody.content["application/json"].schema.properties.password.minLength).toBe(12);
    const list = doc.paths["/v1/wallets/{id}/transactions"].get;
    expect(list.parameters.map((p: { name: string }) => p.name)).toEqual(
      expect.arrayContaining(["id", "limit", "offset", "chain", "type"]),
    );
  });

  it("serves a human docs page at /docs listing the operations", async () => {
    const response = await fetch(`${server.url}/docs`);
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toContain("text/html");
    const html = await response.text();
    expect(html).toContain("POST /v1/wallets");
    expect(html).toContain("GET /v1/wallets/{id}/transactions");
  });

  it("logs JSON lines with the request id and never a password, API key or token", async () => {
    const account = await seedAccount(server.api);
    const wallet = await server.api.post("/v1/wallets", { name: "logged", chains: ["base"] }, account.apiKey);
    await server.api.post("/v1/auth/login", { email: account.email, password: "wrong-password-123" });
    const lines = server.logs.lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    const forWallet = lines.filter((l) => l.requestId === wallet.headers.get("x-request-id"));
    expect(forWallet.length).toBeGreaterThan(0);
    const text = server.logs.text();
    for (const secret of [account.password, account.apiKey, account.accessToken, "wrong-password-123"]) {
      expect(text.includes(secret)).toBe(false);
    }
  });
});
