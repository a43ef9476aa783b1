import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestServer, expectErrorShape, seedAccount, type TestServer } from "./support/test-server.ts";

let server: TestServer;
let apiKey: string;
beforeAll(async () => {
  server = await createTestServer();
  ({ apiKey } = await seedAccount(server.api));
});
afterAll(() => server.close());

async function newWallet(policy?: Record<string, unknown>): Promise<string> {
  const response = await server.api.post(
    "/v1/wallets",
    { name: "p", chains: ["base"], ...(policy ? { policy } : {}) },
    apiKey,
  );
  return response.body.id;
}

describe("the spending policy resource", () => {
  it("starts with no bounds, active, and reads back what creation set", async () => {
    const plain = await server.api.get(`/v1/wallets/${await newWallet()}/policy`, apiKey);
    expect(plain.status).toBe(200);
    expect(plain.body).toMatchObject({
      maxPerTx: null,
      dailyLimit: null,
      alertAbove: null,
      whitelist: [],
      status: "active",
    });
    const id = await newWallet({ maxPerTx: "10.5", dailyLimit: 50 });
    const set = await server.api.get(`/v1/wallets/${id}/policy`, apiKey);
    expect(set.body).toMatchObject({ walletId: id, maxPerTx: "10.5", dailyLimit: "50" });
  });

  it("PATCH changes only the fields given, and null removes a bound", async () => {
    const id = await newWallet({ maxPerTx: "10", dailyLimit: "50" });
    const patched = await server.api.request("PATCH", `/v1/wallets/${id}/policy`, {
      token: apiKey,
      body: { dailyLimit: "75.25", whitelist: ["0x000000000000000000000000000000000000dEaD"] },
    });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({
      maxPerTx: "10",
      dailyLimit: "75.25",
      whitelist: ["0x000000000000000000000000000000000000dEaD"],
    });
    const cleared = await server.api.request("PATCH", `/v1/wallets/${id}/policy`, {
      token: apiKey,
      body: { maxPerTx: null },
    });
    expect(cleared.body).toMatchObject({ maxPerTx: null, dailyLimit: "75.25" });
  });

  it("pauses and resumes", async () => {
    const id = await newWallet();
    const paused = await server.api.post(`/v1/wallets/${id}/policy/pause`, undefined, apiKey);
    expect(paused.status).toBe(200);
    expect(paused.body.status).toBe("paused");
    const resumed = await server.api.post(`/v1/wallets/${id}/policy/resume`, undefined, apiKey);
    expect(resumed.body.status).toBe("active");
  });

  it("rejects bad values with 400 and another account's wallet with 404", async () => {
    const id = await newWallet();
    for (const body of [
      { maxPerTx: "-1" },
      { dailyLimit: "1.0000001" },
      { whitelist: "x" },
      { status: "paused" },
      { maxPerTx: "ten" },
    ]) {
      const response = await server.api.request("PATCH", `/v1/wallets/${id}/policy`, { token: apiKey, body });
      expect(response.status, JSON.stringify(body)).toBe(400);
      expect(expectErrorShape(response).code).toBe("ValidationError");
    }
    const other = await seedAccount(server.api, "other");
    for (const [method, path] of [
      ["GET", `/v1/wallets/${id}/policy`],
      ["PATCH", `/v1/wallets/${id}/policy`],
      ["POST", `/v1/wallets/${id}/policy/pause`],
      ["POST", `/v1/wallets/${id}/policy/resume`],
    ] as const) {
      const response = await server.api.request(method, path, {
        token: other.apiKey,
        ...(method === "PATCH" ? { body: {} } : {}),
      });
      expect(response.status, `${method} ${path}`).toBe(404);
    }
    expect((await server.api.get(`/v1/wallets/${id}/policy`, apiKey)).body.status).toBe("active");
  });
});
