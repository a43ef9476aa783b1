import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { requestAsSent } from "./support/api-client.ts";
import { createTestServer, type TestServer } from "./support/test-server.ts";

/**
 * DNS rebinding: a page at http://attacker.example:PORT whose name the attacker then resolves to 127.0.0.1
 * sends its requests to a service listening there, and its browser lets the page read the answers (same
 * origin, as far as the browser knows). Such requests name the attacker's host; the service refuses them.
 */
const ATTACKER = "attacker.example";

let server: TestServer;
let listed: TestServer;
beforeAll(async () => {
  [server, listed] = await Promise.all([
    createTestServer(),
    createTestServer({ env: { SVC_ALLOWED_HOSTS: "wallet.example", SVC_TRUST_PROXY: "127.0.0.1" } }),
  ]);
});
afterAll(() => Promise.all([server?.close(), listed?.close()]));

function hostOf(service: TestServer, name: string): string {
  return `${name}:${new URL(service.url).port}`;
}

describe("a request naming a host the service does not answer to", () => {
  it("is refused 403 host_not_allowed, on every kind of route, with nothing created", async () => {
    const host = hostOf(server, ATTACKER);
    const register = await requestAsSent(server.url, {
      method: "POST",
      path: "/v1/auth/register",
      headers: { host, "content-type": "application/json" },
      body: JSON.stringify({ email: "rebound@example.com", password: "correct horse battery" }),
    });
    expect(register.status).toBe(403);
    expect(register.headers["cache-control"]).toBe("no-store");
    expect(JSON.parse(register.text).error).toEqual({
      code: "Forbidden",
      reason: "host_not_allowed",
      message: expect.stringContaining("SVC_ALLOWED_HOSTS"),
      requestId: register.headers["x-request-id"],
    });
    // Nothing was registered: the same registration, naming the service's address, goes through.
    const again = await server.api.post("/v1/auth/register", {
      email: "rebound@example.com",
      password: "correct horse battery",
    });
    expect(again.status).toBe(201);

    for (const path of ["/healthz", "/", "/docs", "/v1/openapi.json", "/v1/wallets", "/mcp"]) {
      const response = await requestAsSent(server.url, { path, headers: { host } });
      expect(response.status, path).toBe(403);
      expect(JSON.parse(response.text).error.reason, path).toBe("host_not_allowed");
    }
  });

  it("is served when it names the service by address or localhost, as browsers and clients on the machine do", async () => {
    const port = new URL(server.url).port;
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`, `svc.localhost:${port}`]) {
      const response = await requestAsSent(server.url, { path: "/healthz", headers: { host } });
      expect(response.status, host).toBe(200);
    }
  });

  it("is served under a name the operator listed in SVC_ALLOWED_HOSTS, and only that one", async () => {
    const served = await requestAsSent(listed.url, {
      path: "/healthz",
      headers: { host: hostOf(listed, "WALLET.example") },
    });
    expect(served.status).toBe(200);
    const other = await requestAsSent(listed.url, {
      path: "/healthz",
      headers: { host: hostOf(listed, `wallet.example.${ATTACKER}`) },
    });
    expect(other.status).toBe(403);
  });

  it("behind a trusted proxy, is judged by the host the browser named to the proxy (X-Forwarded-Host)", async () => {
    const rebound = await requestAsSent(listed.url, {
      path: "/healthz",
      headers: { host: "127.0.0.1", "x-forwarded-host": ATTACKER },
    });
    expect(rebound.status).toBe(403);
    const served = await requestAsSent(listed.url, {
      path: "/healthz",
      headers: { host: "127.0.0.1", "x-forwarded-host": "wallet.example" },
    });
    expect(served.status).toBe(200);
  });

  it("from a trusted proxy's address, is judged by its Host too: a browser there reaching the service directly writes X-Forwarded-Host itself", async () => {
    // A page rebound to 127.0.0.1 is same-origin to its browser, which sends any header it adds unasked.
    const rebound = await requestAsSent(listed.url, {
      path: "/healthz",
      headers: { host: hostOf(listed, ATTACKER), "x-forwarded-host": "wallet.example" },
    });
    expect(rebound.status).toBe(403);
    expect(JSON.parse(rebound.text).error.reason).toBe("host_not_allowed");
  });
});
