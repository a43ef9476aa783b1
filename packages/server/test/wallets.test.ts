import { createKeyPairSignerFromPrivateKeyBytes } from "@solana/kit";
import { fundEvm } from "@svc/devnet";
import { getAddress } from "viem";
import { privateKeyToAddress } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getPolicy } from "../src/policy/policy.ts";
import { mainnetProfileOnLocalChains } from "./support/chains.ts";
import { eventually } from "./support/eventually.ts";
import { openStoredKey } from "./support/keys.ts";
import {
  createTestServer,
  expectErrorShape,
  seedAccount,
  sharedDevnet,
  type TestServer,
} from "./support/test-server.ts";

let server: TestServer;
let apiKey: string;
beforeAll(async () => {
  server = await createTestServer();
  ({ apiKey } = await seedAccount(server.api));
});
afterAll(() => server.close());

describe("POST /v1/wallets", () => {
  it("creates a wallet whose EVM and Solana addresses come from real, stored key pairs", async () => {
    const response = await server.api.post(
      "/v1/wallets",
      { name: "trading agent", chains: ["base", "solana"], metadata: { team: "research", budget: 5 } },
      apiKey,
    );
    expect(response.status).toBe(201);
    const wallet = response.body;
    expect(wallet).toMatchObject({
      name: "trading agent",
      chains: ["base", "solana"],
      metadata: { team: "research", budget: 5 },
      status: "active",
    });
    expect(wallet.id).toMatch(/^wal_/);
    // EIP-55: the checksummed form is exactly what was returned.
    expect(getAddress(wallet.evm.address)).toBe(wallet.evm.address);
    expect(wallet.evm.address).not.toBe(wallet.evm.address.toLowerCase());
    expect(wallet.solana.address).toMatch(/^[1-9A-HJ-NP-Za-km-z]{32,44}$/);

    const evmSecret = await openStoredKey(server.service, wallet.id, "evm");
    expect(privateKeyToAddress(`0x${evmSecret.toString("hex")}`)).toBe(wallet.evm.address);
    const solanaSeed = await openStoredKey(server.service, wallet.id, "solana");
    expect((await createKeyPairSignerFromPrivateKeyBytes(new Uint8Array(solanaSeed))).address).toBe(
      wallet.solana.address,
    );
    expect(response.text).not.toContain(evmSecret.toString("hex"));
  });

  it("gives a wallet of EVM chains only an evm address, one address for every EVM chain", async () => {
    // The mainnet profile serves three EVM chains; its RPC URLs point at the local chains here, since
    // creating a wallet makes no chain call.
    const devnet = await sharedDevnet();
    const mainnet = await createTestServer({
      env: mainnetProfileOnLocalChains(devnet),
    });
    try {
      const key = (await seedAccount(mainnet.api)).apiKey;
      const response = await mainnet.api.post(
        "/v1/wallets",
        { name: "evm only", chains: ["base", "ethereum", "arbitrum"] },
        key,
      );
      expect(response.status).toBe(201);
      expect(response.body.evm.address).toMatch(/^0x[0-9a-fA-F]{40}$/);
      expect(response.body.solana).toBeUndefined();
      const solanaOnly = await mainnet.api.post("/v1/wallets", { name: "sol", chains: ["solana"] }, key);
      expect(solanaOnly.body.evm).toBeUndefined();
      expect(solanaOnly.body.solana.address).toBeTruthy();
    } finally {
      await mainnet.close();
    }
  });

  it("stores a policy given at creation", async () => {
    const response = await server.api.post(
      "/v1/wallets",
      {
        name: "limited",
        chains: ["base"],
        policy: { maxPerTx: "10", dailyLimit: 50, whitelist: ["0x000000000000000000000000000000000000dEaD"] },
      },
      apiKey,
    );
    expect(response.status).toBe(201);
    const policy = await getPolicy(server.service.store.db, response.body.id);
    expect(policy).toMatchObject({ maxPerTx: "10", dailyLimit: "50", alertAbove: null, status: "active" });
  });

  it.each([
    ["an unknown chain", { name: "w", chains: ["dogecoin"] }, "unknown_chain"],
    ["no chains", { name: "w", chains: [] }, "invalid_body"],
    ["no name", { chains: ["base"] }, "invalid_body"],
    ["metadata that is not an object", { name: "w", chains: ["base"], metadata: [1, 2] }, "invalid_body"],
    [
      "a policy amount with 7 decimals",
      { name: "w", chains: ["base"], policy: { maxPerTx: "0.0000001" } },
      "invalid_body",
    ],
    [
      "a negative policy amount",
      { name: "w", chains: ["base"], policy: { dailyLimit: "-5" } },
      "invalid_body",
    ],
  ])("rejects %s with 400", async (_label, body, reason) => {
    const response = await server.api.post("/v1/wallets", body, apiKey);
    expect(response.status).toBe(400);
    expect(expectErrorShape(response)).toMatchObject({ code: "ValidationError", reason });
  });
});

describe("reading and archiving wallets", () => {
  it("lists the account's wallets newest first and gets one by id", async () => {
    const { apiKey: key } = await seedAccount(server.api);
    const first = await server.api.post("/v1/wallets", { name: "first", chains: ["base"] }, key);
    const second = await server.api.post("/v1/wallets", { name: "second", chains: ["solana"] }, key);
    const list = await server.api.get("/v1/wallets", key);
    expect(list.body.map((w: { id: string }) => w.id)).toEqual([second.body.id, first.body.id]);
    const one = await server.api.get(`/v1/wallets/${first.body.id}`, key);
    expect(one.status).toBe(200);
    expect(one.body).toEqual(first.body);
  });

  it("answers 404 NotFound for a wallet that does not exist", async () => {
    const response = await server.api.get("/v1/wallets/wal_doesnotexist0000000000", apiKey);
    expect(response.status).toBe(404);
    expect(expectErrorShape(response).code).toBe("NotFound");
  });

  it("lists the account's wallets newest first, paged by limit and offset", async () => {
    const owner = await seedAccount(server.api);
    const ids: string[] = [];
    for (const name of ["first", "second", "third"]) {
      ids.unshift((await server.api.post("/v1/wallets", { name, chains: ["base"] }, owner.apiKey)).body.id);
    }
    const list = async (query: string) =>
      (await server.api.get(`/v1/wallets${query}`, owner.apiKey)).body.map((w: { id: string }) => w.id);
    expect(await list("")).toEqual(ids);
    expect(await list("?limit=2")).toEqual(ids.slice(0, 2));
    expect(await list("?limit=1&offset=1")).toEqual(ids.slice(1, 2));
    expect(await list("?offset=2")).toEqual(ids.slice(2));
    expect(await list("?limit=1000000")).toEqual(ids);
  });

  it("refuses an unknown query parameter or a bad limit or offset with 400 invalid_query", async () => {
    for (const [query, message] of [
      ["?status=active", 'Invalid query: (root): Unrecognized key: "status"'],
      ["?cursor=abc", 'Invalid query: (root): Unrecognized key: "cursor"'],
      ["?limit=0", "Invalid query: limit: Too small: expected number to be >=1"],
      ["?limit=-1", "Invalid query: limit: limit must be a non-negative integer"],
      ["?limit=1.5", "Invalid query: limit: limit must be a non-negative integer"],
      ["?limit=ten", "Invalid query: limit: limit must be a non-negative integer"],
      ["?offset=99999999999", "Invalid query: offset: offset must be a non-negative integer"],
      ["?limit=1&limit=2", "Invalid query: limit: Invalid input: expected string, received array"],
    ]) {
      const response = await server.api.get(`/v1/wallets${query}`, apiKey);
      expect(response.status, query).toBe(400);
      expect(expectErrorShape(response), query).toMatchObject({
        code: "ValidationError",
        reason: "invalid_query",
        message,
      });
    }
  });

  it("refuses a query on the routes that take none with 400 invalid_query (they ignored it), and sends nothing", async () => {
    const created = await server.api.post("/v1/wallets", { name: "q", chains: ["base"] }, apiKey);
    for (const path of ["", "/balance", "/spending", "/policy"]) {
      const response = await server.api.get(`/v1/wallets/${created.body.id}${path}?chain=solana`, apiKey);
      expect(response.status, path).toBe(400);
      expect(expectErrorShape(response), path).toMatchObject({
        reason: "invalid_query",
        message: 'Invalid query: (root): Unrecognized key: "chain"',
      });
    }
    const send = await server.api.post(
      `/v1/wallets/${created.body.id}/send?dryRun=true`,
      { to: `0x${"1".repeat(40)}`, amount: "1", token: "USDC", chain: "base" },
      apiKey,
    );
    expect(expectErrorShape(send).reason).toBe("invalid_query");
    expect(
      (await server.api.get(`/v1/wallets/${created.body.id}/transactions?type=send`, apiKey)).body.data,
    ).toEqual([]);
  });

  it("archives with 204, keeps the wallet readable as archived, and archiving twice is harmless", async () => {
    const created = await server.api.post("/v1/wallets", { name: "old", chains: ["base"] }, apiKey);
    const archived = await server.api.delete(`/v1/wallets/${created.body.id}`, apiKey);
    expect(archived.status).toBe(204);
    const read = await server.api.get(`/v1/wallets/${created.body.id}`, apiKey);
    expect(read.body.status).toBe("archived");
    expect((await server.api.get("/v1/wallets", apiKey)).body.map((w: { id: string }) => w.id)).toContain(
      created.body.id,
    );
    expect((await server.api.delete(`/v1/wallets/${created.body.id}`, apiKey)).status).toBe(204);
    const history = await server.api.get(`/v1/wallets/${created.body.id}/transactions`, apiKey);
    expect(history.status).toBe(200);
  });

  it("is undone by an admin's restore, not by the agent that archived it: the funds spend again", async () => {
    const created = await server.api.post("/v1/wallets", { name: "stranded", chains: ["base"] }, apiKey);
    const wallet = created.body;
    await fundEvm(await sharedDevnet(), wallet.evm.address, { eth: 10n ** 17n, usdc: 5_000_000n });
    const agent = await server.api.post(
      "/v1/api-keys",
      { name: "agent", role: "agent", walletIds: [wallet.id] },
      apiKey,
    );
    // The agent, talked into it, archives its wallet: a step towards safety it may take...
    expect((await server.api.delete(`/v1/wallets/${wallet.id}`, agent.body.key)).status).toBe(204);
    const send = (token: string) =>
      server.api.post(
        `/v1/wallets/${wallet.id}/send`,
        { to: "0x000000000000000000000000000000000000dEaD", amount: "1", chain: "base" },
        token,
      );
    expect(expectErrorShape(await send(apiKey)).reason).toBe("wallet_archived");
    // ...but not one it can take back.
    const byAgent = await server.api.post(`/v1/wallets/${wallet.id}/restore`, undefined, agent.body.key);
    expect(byAgent.status).toBe(403);
    expect(expectErrorShape(byAgent).reason).toBe("insufficient_role");
    const stranger = await seedAccount(server.api, "stranger");
    expect(
      (await server.api.post(`/v1/wallets/${wallet.id}/restore`, undefined, stranger.apiKey)).status,
    ).toBe(404);

    const restored = await server.api.post(`/v1/wallets/${wallet.id}/restore`, undefined, apiKey);
    expect(restored.status, restored.text).toBe(200);
    expect(restored.body).toMatchObject({ id: wallet.id, status: "active" });
    expect((await server.api.get(`/v1/wallets/${wallet.id}`, apiKey)).body.status).toBe("active");
    // Restoring an active wallet changes nothing; the owner's send goes out again.
    expect((await server.api.post(`/v1/wallets/${wallet.id}/restore`, undefined, apiKey)).body.status).toBe(
      "active",
    );
    const sent = await send(apiKey);
    expect(sent.status, sent.text).toBe(201);
    // One wallet.restored event, for the one restore that changed something.
    const events = await eventually(async () => {
      const page = await server.api.get(
        `/v1/events?walletId=${wallet.id}&type=wallet.archived,wallet.restored`,
        apiKey,
      );
      return page.body.data.length >= 2 && page.body.data;
    });
    expect(events.map((e: { type: string; data: { status: string } }) => [e.type, e.data.status])).toEqual([
      ["wallet.archived", "archived"],
      ["wallet.restored", "active"],
    ]);
  });
});
