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

  it("gives another account 404 for the first account's transaction and refuses its sends, moving nothing", async () => {
    const owner = await seedAccount(server.api, "owner");
    const other = await seedAccount(server.api, "other");
    const wallet = (await server.api.post("/v1/wallets", { name: "funded", chains: ["base"] }, owner.apiKey))
      .body;
    // Funded, so the same send from its owner goes through (checked last): only the account stops it.
    const received = await server.api.post(
      `/v1/wallets/${wallet.id}/faucet`,
      { chain: "base", token: "USDC", amount: "5" },
      owner.apiKey,
    );
    expect(received.status, received.text).toBe(201);
    await server.api.post(
      `/v1/wallets/${wallet.id}/faucet`,
      { chain: "base", token: "ETH", amount: "0.01" },
      owner.apiKey,
    );
    const send = { to: "0x1111111111111111111111111111111111111111", amount: "1", chain: "base" };
    const foreignRequests: [string, string, unknown?][] = [
      ["GET", `/v1/transactions/${received.body.id}`],
      ["POST", `/v1/wallets/${wallet.id}/send`, send],
      ["POST", `/v1/wallets/${wallet.id}/faucet`, { chain: "base", token: "USDC", amount: "1" }],
      ["GET", `/v1/wallets/${wallet.id}/balance`],
      ["GET", `/v1/wallets/${wallet.id}/policy`],
      ["PATCH", `/v1/wallets/${wallet.id}/policy`, { maxPerTx: "1" }],
      ["POST", `/v1/wallets/${wallet.id}/policy/pause`],
    ];
    for (const credential of [other.apiKey, other.accessToken]) {
      for (const [method, path, body] of foreignRequests) {
        const response = await server.api.request(method, path, {
          token: credential,
          ...(body === undefined ? {} : { body }),
        });
        expect(response.status, `${method} ${path}: ${response.text}`).toBe(404);
        expect(expectErrorShape(response).code).toBe("NotFound");
      }
    }
    const unknown = await server.api.get("/v1/transactions/tx_neverexisted000000000000", other.apiKey);
    expect(unknown.status).toBe(404);
    // The owner's wallet is as it was: two receives, no send, the whole 5 USDC, the policy untouched.
    const history = (await server.api.get(`/v1/wallets/${wallet.id}/transactions`, owner.apiKey)).body;
    expect(history.data.map((t: { type: string }) => t.type)).toEqual(["receive", "receive"]);
    const balance = (await server.api.get(`/v1/wallets/${wallet.id}/balance`, owner.apiKey)).body;
    expect(balance.balances).toContainEqual(expect.objectContaining({ token: "USDC", amount: "5" }));
    expect((await server.api.get(`/v1/wallets/${wallet.id}/policy`, owner.apiKey)).body).toMatchObject({
      maxPerTx: null,
      status: "active",
    });
    // And the owner's own send of the same request goes through.
    const own = await server.api.post(`/v1/wallets/${wallet.id}/send`, send, owner.apiKey);
    expect(own.status, own.text).toBe(201);
  });
});
