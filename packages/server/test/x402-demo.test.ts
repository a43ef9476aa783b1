/**
 * The local x402 demo that `npm start` serves on the devnet profile: a paid resource (v2, and its v1 twin)
 * and a facilitator settling on the devnet, listed in discovery. An agent finds it, pays it through the
 * service, and its history and balances show the payment.
 */
import { fundEvm } from "@svc/devnet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { devnetClients } from "./support/chains.ts";
import { createTestServer, seedAccount, sharedDevnet, type TestServer } from "./support/test-server.ts";

let server: TestServer;
let owner: Awaited<ReturnType<typeof seedAccount>>;

beforeAll(async () => {
  server = await createTestServer({ x402Demo: true });
  owner = await seedAccount(server.api);
});
afterAll(async () => {
  await server?.close();
});

describe("the local x402 demo", () => {
  it("is logged at start, listed in discovery, and paid over v2 and v1 from a wallet on base", async () => {
    const started = server.logs.lines.map((line) => JSON.parse(line)).find((line) => line.x402Demo);
    expect(started?.msg).toMatch(/^x402 demo: a paid resource at http:\/\/127\.0\.0\.1:\d+\/weather/);
    const { url, v1Url } = started.x402Demo as { url: string; v1Url: string };

    const listed = await server.api.get("/v1/x402/services?category=demo", owner.apiKey);
    expect(listed.status, listed.text).toBe(200);
    expect(listed.body.data.map((s: { resource: string }) => s.resource)).toEqual([url, v1Url]);

    const created = await server.api.post("/v1/wallets", { name: "agent", chains: ["base"] }, owner.apiKey);
    expect(created.status, created.text).toBe(201);
    const wallet = created.body as { id: string; evm: { address: `0x${string}` } };
    await fundEvm(await sharedDevnet(), wallet.evm.address, { usdc: 1_000_000n });
    const { base } = await devnetClients(await sharedDevnet());
    const usdc = base.config.tokens[0] as (typeof base.config.tokens)[number];
    const balanceOf = (address: string) => base.getBalance(address, usdc);
    const before = await balanceOf(wallet.evm.address);

    const paid: string[] = [];
    for (const resource of [url, v1Url]) {
      const response = await server.api.post(
        "/v1/x402/fetch",
        { walletId: wallet.id, url: resource },
        owner.apiKey,
      );
      expect(response.status, response.text).toBe(200);
      expect(response.body).toMatchObject({
        status: 200,
        body: { city: "Lisbon", forecast: "sunny" },
        amountCharged: "0.01",
        paymentReceipt: { success: true },
        transaction: { type: "x402", status: "confirmed", chain: "base", resource },
      });
      paid.push(response.body.transaction.txHash);
    }
    const history = await server.api.get(`/v1/wallets/${wallet.id}/transactions?type=x402`, owner.apiKey);
    expect(history.body.data.map((t: { txHash: string }) => t.txHash).sort()).toEqual([...paid].sort());
    expect(await balanceOf(wallet.evm.address)).toBe(before - 20_000n);
  });
});
