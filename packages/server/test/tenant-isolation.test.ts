import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestServer, expectErrorShape, seedAccount, type TestServer } from "./support/test-server.ts";

let server: TestServer;
beforeAll(async () => {
  server = await createTestServer();
});
afterAll(() => server.close());

describe("tenant isolation", () => {
  it("gives a second account 404 on every route that names the first account's resources", async () => {
    const owner = await seedAccount(server.api, "owner");
    const other = await seedAccount(server.api, "other");
    const wallet = (
      await server.api.post("/v1/wallets", { name: "mine", chains: ["base", "solana"] }, owner.apiKey)
    ).body;
    const foreignRequests: [string, string][] = [
      ["GET", `/v1/wallets/${wallet.id}`],
      ["DELETE", `/v1/wallets/${wallet.id}`],
      ["GET", `/v1/wallets/${wallet.id}/transactions`],
      ["DELETE", `/v1/api-keys/${owner.apiKeyId}`],
    ];
    for (const credential of [other.apiKey, other.accessToken]) {
      for (const [method, path] of foreignRequests) {
        const response = await server.api.request(method, path, { token: credential });
        expect(response.status, `${method} ${path}`).toBe(404);
        const error = expectErrorShape(response);
        expect(error.code).toBe("NotFound");
        // The answer is the same as for an id that never existed.
        const unknownPath = path
          .replace(wallet.id, "wal_neverexisted000000000")
          .replace(owner.apiKeyId, "key_neverexisted000000000");
        const unknown = await server.api.request(method, unknownPath, { token: credential });
        expect(unknown.status).toBe(404);
      }
    }
    // Nothing of the owner's leaks into the other account's lists, and nothing was changed.
    expect((await server.api.get("/v1/wallets", other.apiKey)).body).toEqual([]);
    expect(
      (await server.api.get("/v1/api-keys", other.apiKey)).body.map((k: { id: string }) => k.id),
    ).not.toContain(owner.apiKeyId);
    expect((await server.api.get(`/v1/wallets/${wallet.id}`, owner.apiKey)).body.status).toBe("active");
    expect((await server.api.get("/v1/wallets", owner.apiKey)).status).toBe(200);
  });
});
