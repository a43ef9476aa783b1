import { createHash } from "node:crypto";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { accounts } from "../src/internal/db/schema.ts";
import { createTestServer, expectErrorShape, seedAccount, type TestServer } from "./support/test-server.ts";

let server: TestServer;
let apiKey: string;
beforeAll(async () => {
  server = await createTestServer();
  ({ apiKey } = await seedAccount(server.api));
});
afterAll(() => server.close());

describe("the error contract", () => {
  it("answers an unknown route with 404 route_not_found and an X-Request-Id", async () => {
    for (const [method, path] of [
      ["GET", "/v1/nothing-here"],
      ["POST", "/v2/wallets"],
      ["PUT", "/v1/wallets"],
    ] as const) {
      const response = await server.api.request(method, path, { token: apiKey });
      expect(response.status).toBe(404);
      expect(expectErrorShape(response)).toMatchObject({ code: "NotFound", reason: "route_not_found" });
    }
  });

  it("answers malformed JSON with 400 invalid_body", async () => {
    for (const rawBody of ["{", '{"name": }', "[1,2", "nul", '{"name":"a"}}']) {
      const response = await server.api.request("POST", "/v1/wallets", {
        token: apiKey,
        rawBody,
        headers: { "content-type": "application/json" },
      });
      expect(response.status, rawBody).toBe(400);
      expect(expectErrorShape(response)).toMatchObject({ code: "ValidationError", reason: "invalid_body" });
    }
  });

  it("answers a body over 64 KiB with 413 body_too_large", async () => {
    const response = await server.api.post(
      "/v1/wallets",
      { name: "big", chains: ["base"], metadata: { blob: "x".repeat(70_000) } },
      apiKey,
    );
    expect(response.status).toBe(413);
    expect(expectErrorShape(response)).toMatchObject({ code: "ValidationError", reason: "body_too_large" });
  });

  it("answers a body that is not JSON with 415 unsupported_media_type", async () => {
    const response = await server.api.request("POST", "/v1/wallets", {
      token: apiKey,
      rawBody: "name=w",
      headers: { "content-type": "application/x-www-form-urlencoded" },
    });
    expect(response.status).toBe(415);
    expect(expectErrorShape(response)).toMatchObject({
      code: "ValidationError",
      reason: "unsupported_media_type",
      message: 'Unsupported Content-Type "application/x-www-form-urlencoded"; send application/json',
    });
  });

  it("accepts Content-Type: application/json with an empty body where the route takes no body", async () => {
    const wallet = await server.api.post("/v1/wallets", { name: "empty-bodies", chains: ["base"] }, apiKey);
    const other = await server.api.post("/v1/api-keys", { name: "to revoke" }, apiKey);
    const json = { "content-type": "application/json" };
    // As clients send them: the header with an empty body, or the header and no body at all.
    for (const [method, path, expected, rawBody, headers] of [
      ["POST", `/v1/wallets/${wallet.body.id}/policy/pause`, 200, "", json],
      ["POST", `/v1/wallets/${wallet.body.id}/policy/resume`, 200, undefined, json],
      ["POST", `/v1/wallets/${wallet.body.id}/policy/pause`, 200, "", { "content-type": "text/plain" }],
      [
        "DELETE",
        `/v1/api-keys/${other.body.id}`,
        204,
        "",
        { "content-type": "application/json; charset=utf-8" },
      ],
      ["DELETE", `/v1/wallets/${wallet.body.id}`, 204, undefined, json],
    ] as const) {
      const response = await server.api.request(method, path, {
        token: apiKey,
        headers,
        ...(rawBody !== undefined ? { rawBody } : {}),
      });
      expect(response.status, `${method} ${path} ${response.text}`).toBe(expected);
    }
  });

  it("refuses a body where the route takes none, 400 invalid_body, and does nothing; {} passes", async () => {
    const wallet = await server.api.post("/v1/wallets", { name: "no-body", chains: ["base"] }, apiKey);
    const pause = `/v1/wallets/${wallet.body.id}/policy/pause`;
    for (const rawBody of ['{"status":"active"}', "[1,2]", "null", '"pause"', "1"]) {
      const response = await server.api.request("POST", pause, {
        token: apiKey,
        rawBody,
        headers: { "content-type": "application/json" },
      });
      expect(response.status, rawBody).toBe(400);
      expect(expectErrorShape(response), rawBody).toMatchObject({
        reason: "invalid_body",
        message: "POST /v1/wallets/:id/policy/pause takes no body",
      });
    }
    expect((await server.api.get(`/v1/wallets/${wallet.body.id}/policy`, apiKey)).body.status).toBe("active");
    const empty = await server.api.request("POST", pause, {
      token: apiKey,
      rawBody: "{}",
      headers: { "content-type": "application/json" },
    });
    expect(empty.status, empty.text).toBe(200);
    expect((await server.api.get(`/v1/wallets/${wallet.body.id}/policy`, apiKey)).body.status).toBe("paused");
  });

  it("answers an empty body where the route takes one with 400 invalid_body naming what is missing", async () => {
    const response = await server.api.request("POST", "/v1/wallets", {
      token: apiKey,
      rawBody: "",
      headers: { "content-type": "application/json" },
    });
    expect(response.status).toBe(400);
    const error = expectErrorShape(response);
    expect(error).toMatchObject({ code: "ValidationError", reason: "invalid_body" });
    expect(error.message).toMatch(/^Invalid body: \(root\): /);
  });

  it("answers a text/plain body with 415 unsupported_media_type, whether or not the route takes a body", async () => {
    const wallet = await server.api.post("/v1/wallets", { name: "plain", chains: ["base"] }, apiKey);
    for (const [method, path] of [
      ["POST", "/v1/wallets"],
      ["POST", `/v1/wallets/${wallet.body.id}/policy/pause`],
      ["DELETE", `/v1/wallets/${wallet.body.id}`],
    ] as const) {
      const response = await server.api.request(method, path, {
        token: apiKey,
        rawBody: '{"name":"w","chains":["base"]}',
        headers: { "content-type": "text/plain" },
      });
      expect(response.status, `${method} ${path}`).toBe(415);
      expect(expectErrorShape(response)).toMatchObject({
        code: "ValidationError",
        reason: "unsupported_media_type",
        message: 'Unsupported Content-Type "text/plain"; send application/json',
      });
    }
    // Nothing was done: the wallet is still active and its policy unpaused.
    expect((await server.api.get(`/v1/wallets/${wallet.body.id}`, apiKey)).body.status).toBe("active");
    expect((await server.api.get(`/v1/wallets/${wallet.body.id}/policy`, apiKey)).body.status).toBe("active");
  });

  it("puts X-Request-Id on successful responses too, each one different", async () => {
    const a = await server.api.get("/v1/wallets", apiKey);
    const b = await server.api.get("/v1/wallets", apiKey);
    expect(a.headers.get("x-request-id")).toMatch(/^req_[0-9A-Za-z]{16}$/);
    expect(a.headers.get("x-request-id")).not.toBe(b.headers.get("x-request-id"));
  });

  it("answers an unexpected failure with a generic 500 and logs its cause under the request id", async () => {
    const broken = await createTestServer();
    try {
      const account = await seedAccount(broken.api);
      // Pull the store out from under the running service: every query now fails unexpectedly.
      await broken.service.store.close();
      const response = await broken.api.get("/v1/wallets", account.apiKey);
      expect(response.status).toBe(500);
      const error = expectErrorShape(response);
      expect(error).toMatchObject({
        code: "InternalError",
        message: "Internal error; the request id locates it in the log",
      });
      const logged = broken.logs.lines
        .map((line) => JSON.parse(line))
        .find((entry) => entry.msg === "request failed");
      expect(logged?.requestId).toBe(error.requestId);
      expect(logged?.err).toBeDefined();
      // The failed query is logged without its parameters: here, the hash of the API key.
      const keyHash = createHash("sha256").update(account.apiKey).digest("hex");
      expect(broken.logs.text()).not.toContain(keyHash);
      const health = await broken.api.get("/healthz");
      expect(health.status).toBe(503);
      expect(expectErrorShape(health)).toMatchObject({ code: "InternalError", reason: "store_unavailable" });
    } finally {
      await broken.service.app.close();
    }
  });
  it("logs a failure of what a request reached out to as a warning, not an error: any caller can cause one", async () => {
    // A loopback port nobody listens on (loopback is exempt from the outbound guard on the devnet profile).
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const wallet = await server.api.post("/v1/wallets", { name: "fetcher", chains: ["base"] }, apiKey);
    const response = await server.api.post(
      "/v1/x402/fetch",
      { walletId: wallet.body.id, url: `http://127.0.0.1:${port}/data` },
      apiKey,
    );
    expect(response.status, response.text).toBe(502);
    const error = expectErrorShape(response);
    expect(error.reason).toBe("resource_unreachable");
    const logged = server.logs.lines
      .map((line) => JSON.parse(line))
      .filter((entry) => entry.requestId === error.requestId && entry.msg === "request failed");
    expect(logged.map((entry) => [entry.level, entry.reason])).toEqual([[40, "resource_unreachable"]]);
  });
});

describe("rate limiting", () => {
  it("limits each credential with 429 RateLimitExceeded and Retry-After", async () => {
    const limited = await createTestServer({ env: { SVC_RATE_LIMIT_PER_MINUTE: "5" } });
    try {
      const a = await seedAccount(limited.api);
      const b = await seedAccount(limited.api);
      const statuses = [];
      for (let i = 0; i < 7; i++) statuses.push((await limited.api.get("/v1/wallets", a.apiKey)).status);
      expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429]);
      const last = await limited.api.get("/v1/wallets", a.apiKey);
      // It says which limit: this credential's, not the address's.
      expect(expectErrorShape(last)).toMatchObject({
        code: "RateLimitExceeded",
        message: expect.stringMatching(
          /^Too many requests with this credential \(SVC_RATE_LIMIT_PER_MINUTE\); retry after \d+s$/,
        ),
        details: { scope: "credential" },
      });
      const retryAfter = Number(last.headers.get("retry-after"));
      expect(retryAfter).toBeGreaterThan(0);
      expect(retryAfter).toBeLessThanOrEqual(60);
      // Another credential from the same address is counted separately.
      expect((await limited.api.get("/v1/wallets", b.apiKey)).status).toBe(200);
    } finally {
      await limited.close();
    }
  });

  it("limits each client address across all routes", async () => {
    const limited = await createTestServer({ env: { SVC_RATE_LIMIT_PER_ADDRESS_PER_MINUTE: "4" } });
    try {
      const statuses = [];
      for (let i = 0; i < 6; i++) statuses.push((await limited.api.get("/healthz")).status);
      expect(statuses).toEqual([200, 200, 200, 200, 429, 429]);
      const refused = await limited.api.get("/healthz");
      expect(expectErrorShape(refused).details).toMatchObject({ scope: "address" });
    } finally {
      await limited.close();
    }
  });

  it("shares the counters between instances through Redis when REDIS_URL is set", async () => {
    const env = {
      REDIS_URL: process.env.REDIS_URL ?? "redis://127.0.0.1:6379",
      SVC_RATE_LIMIT_PER_MINUTE: "6",
    };
    const first = await createTestServer({ env });
    const second = await createTestServer({ env });
    try {
      // An access token is valid on both instances (same signing secret) once its account is in both stores
      // (each instance here has its own in-memory store; on PostgreSQL they would share one).
      const { accessToken, userId } = await seedAccount(first.api);
      const [account] = await first.service.store.db.select().from(accounts).where(eq(accounts.id, userId));
      if (!account) throw new Error("seeded account not found");
      await second.service.store.db.insert(accounts).values(account);
      const statuses = [];
      for (let i = 0; i < 4; i++) {
        statuses.push((await first.api.get("/v1/wallets", accessToken)).status);
        statuses.push((await second.api.get("/v1/wallets", accessToken)).status);
      }
      // seedAccount used the token once (creating the API key): 5 more fit under 6, then both refuse.
      expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429, 429]);
    } finally {
      await second.close();
      await first.close();
    }
  });
});
