import { fundEvm } from "@svc/devnet";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { transactions } from "../src/internal/db/schema.ts";
import { admitSpend, failSpend } from "../src/spends/admission.ts";
import { findToken } from "../src/spends/transfer.ts";
import { devnetClients, evmKey } from "./support/chains.ts";
import { openStoredKey } from "./support/keys.ts";
import { createTestServer, seedAccount, sharedDevnet, type TestServer } from "./support/test-server.ts";

let server: TestServer;

beforeAll(async () => {
  await sharedDevnet();
  // The confirmer makes its start-up pass only; this test drives it by hand.
  server = await createTestServer({ env: { SVC_CONFIRMER_INTERVAL_MS: "3600000" } });
});
afterAll(() => server.close());

describe("an EVM nonce that will never be mined", () => {
  it("is filled by the confirmer, so the sends after it are mined", async () => {
    const devnet = await sharedDevnet();
    const { apiKey } = await seedAccount(server.api);
    const created = (await server.api.post("/v1/wallets", { name: "gap", chains: ["base"] }, apiKey)).body;
    await fundEvm(devnet, created.evm.address, { eth: 10n ** 18n, usdc: 10_000_000n });
    const { base } = await devnetClients(devnet);
    const usdc = findToken(base, "USDC");
    const db = server.service.store.db;
    const recipient = evmKey().address;

    // Nonce 0 is handed out and its spend fails before the process gives the nonce back: a crash there.
    const privateKey = await openStoredKey(server.service, created.id, "evm");
    const plan = await base.planTransfer({
      from: created.evm.address,
      to: recipient,
      token: usdc,
      amount: 1n,
    });
    const lost = await admitSpend(
      db,
      {
        walletId: created.id,
        type: "send",
        chain: "base",
        token: usdc,
        amount: 1n,
        from: created.evm.address,
        to: recipient,
        usdMicros: 1n,
      },
      {
        evmNonce: { chainPendingNonce: plan.evm?.pendingNonce ?? 0 },
        sign: (nonce) => base.signTransfer(plan, privateKey, nonce),
      },
    );
    privateKey.fill(0);
    expect(lost.nonce).toBe(0);
    await failSpend(db, lost.id, "test: lost before it was broadcast");

    // The next send gets nonce 1 and is stuck behind the gap.
    const stuck = await server.api.post(
      `/v1/wallets/${created.id}/send`,
      { to: recipient, amount: "2", chain: "base" },
      apiKey,
    );
    expect(stuck.status, stuck.text).toBe(201);
    await server.service.confirmer.runOnce();
    await server.service.confirmer.runOnce();
    const [sent] = await db.select().from(transactions).where(eq(transactions.id, stuck.body.id));
    expect(sent?.status).toBe("confirmed");
    expect(await base.getBalance(recipient, usdc)).toBe(2_000_000n);
    // The gap was filled by a recorded zero-value transfer to the wallet itself, at nonce 0.
    const history = await server.api.get(`/v1/wallets/${created.id}/transactions?type=send`, apiKey);
    const filler = history.body.data.find(
      (t: { amount: string; to: string }) => t.amount === "0" && t.to === created.evm.address,
    );
    expect(filler).toMatchObject({ token: "ETH", status: "confirmed" });
  });
});
