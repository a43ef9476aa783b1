import { createSolanaRpc } from "@solana/kit";
import { fundSolana } from "@svc/devnet";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { transactions } from "../src/internal/db/schema.ts";
import { admitSpend } from "../src/spends/admission.ts";
import { findToken } from "../src/spends/transfer.ts";
import { closeTokenAccount, devnetClients, solanaKey } from "./support/chains.ts";
import { openStoredKey } from "./support/keys.ts";
import { createTestServer, seedAccount, sharedDevnet, type TestServer } from "./support/test-server.ts";

let server: TestServer;
let devnet: Awaited<ReturnType<typeof sharedDevnet>>;

beforeAll(async () => {
  devnet = await sharedDevnet();
  // The confirmer makes its start-up pass only; this test drives it by hand.
  server = await createTestServer({ env: { SVC_CONFIRMER_INTERVAL_MS: "3600000" } });
});
afterAll(() => server.close());

/**
 * The process recorded a spend (recorded as broadcast) and lost its broadcast, a while ago: the wait the
 * confirmer keeps after a broadcast before sending it again is over.
 */
async function broadcastLostAWhileAgo(transactionId: string): Promise<void> {
  await server.service.store.db
    .update(transactions)
    .set({ broadcastAt: new Date(Date.now() - 60_000) })
    .where(eq(transactions.id, transactionId));
}

describe("a Solana spend whose blockhash expired before it landed", () => {
  it("is re-signed with a new blockhash only once the first can no longer land, and pays once", async () => {
    const { apiKey } = await seedAccount(server.api);
    const created = (await server.api.post("/v1/wallets", { name: "expiry", chains: ["solana"] }, apiKey))
      .body;
    await fundSolana(devnet, created.solana.address, { sol: 10n ** 9n, usdc: 10_000_000n });
    const { solana } = await devnetClients(devnet);
    const usdc = findToken(solana, "USDC");
    const recipient = (await solanaKey()).address;
    const db = server.service.store.db;

    // Recorded and signed, as a send is before its broadcast, and then the process "lost" the broadcast.
    const privateKey = await openStoredKey(server.service, created.id, "solana");
    const rowPlan = await solana.planTransfer({
      from: created.solana.address,
      to: recipient,
      token: usdc,
      amount: 2_000_000n,
    });
    const row = await admitSpend(
      db,
      {
        walletId: created.id,
        type: "send",
        chain: "solana",
        token: usdc,
        amount: 2_000_000n,
        from: created.solana.address,
        to: recipient,
        usdMicros: 2_000_000n,
      },
      { sign: () => solana.signTransfer(rowPlan, privateKey) },
    );
    const firstSignature = row.txHash ?? "";
    await broadcastLostAWhileAgo(row.id);

    // While its blockhash is still valid, the confirmer sends the same transaction: nothing is re-signed.
    await server.service.confirmer.runOnce();
    devnet.advanceSolanaSlots(1);
    const [afterResend] = await db.select().from(transactions).where(eq(transactions.id, row.id));
    expect(afterResend?.txHash).toBe(firstSignature);
    await server.service.confirmer.runOnce();
    const [landed] = await db.select().from(transactions).where(eq(transactions.id, row.id));
    expect(landed?.status).toBe("confirmed");
    expect(await solana.getBalance(recipient, usdc)).toBe(2_000_000n);

    // Now one that never reached the chain, and whose blockhash is past its last valid height.
    const secondPlan = await solana.planTransfer({
      from: created.solana.address,
      to: recipient,
      token: usdc,
      amount: 3_000_000n,
    });
    const second = await admitSpend(
      db,
      {
        walletId: created.id,
        type: "send",
        chain: "solana",
        token: usdc,
        amount: 3_000_000n,
        from: created.solana.address,
        to: recipient,
        usdMicros: 3_000_000n,
      },
      { sign: () => solana.signTransfer(secondPlan, privateKey) },
    );
    privateKey.fill(0);
    devnet.advanceSolanaSlots(400);
    await server.service.confirmer.runOnce(); // dropped: rebuilt, re-signed, sent
    const [rebuilt] = await db.select().from(transactions).where(eq(transactions.id, second.id));
    expect(rebuilt?.txHash).not.toBe(second.txHash);
    expect(rebuilt?.status).toBe("pending");
    devnet.advanceSolanaSlots(2);
    await server.service.confirmer.runOnce();
    const [done] = await db.select().from(transactions).where(eq(transactions.id, second.id));
    expect(done?.status).toBe("confirmed");
    // The first signature never landed, the second did: 3 USDC moved once.
    expect(
      await solana.getTransferStatus(
        { txHash: second.txHash ?? "", lastValidBlockHeight: second.lastValidBlockHeight ?? 0n },
        created.solana.address,
      ),
    ).toMatchObject({ state: "dropped" });
    expect(await solana.getBalance(recipient, usdc)).toBe(5_000_000n);
  });

  it("fails a spend that can never land when it is re-sent, and gives its amount back to the daily limit", async () => {
    const { apiKey } = await seedAccount(server.api);
    const created = (
      await server.api.post(
        "/v1/wallets",
        { name: "doomed", chains: ["solana"], policy: { dailyLimit: "10" } },
        apiKey,
      )
    ).body;
    await fundSolana(devnet, created.solana.address, { sol: 10n ** 9n, usdc: 5_000_000n });
    const { solana } = await devnetClients(devnet);
    const usdc = findToken(solana, "USDC");
    const recipient = (await solanaKey()).address;
    const db = server.service.store.db;

    // Recorded (reserving $8 of the $10) and signed, but more than the wallet holds: it can never land.
    const privateKey = await openStoredKey(server.service, created.id, "solana");
    const doomedPlan = await solana.planTransfer({
      from: created.solana.address,
      to: recipient,
      token: usdc,
      amount: 8_000_000n,
    });
    const doomed = await admitSpend(
      db,
      {
        walletId: created.id,
        type: "send",
        chain: "solana",
        token: usdc,
        amount: 8_000_000n,
        from: created.solana.address,
        to: recipient,
        usdMicros: 8_000_000n,
      },
      { sign: () => solana.signTransfer(doomedPlan, privateKey) },
    );
    privateKey.fill(0);
    await broadcastLostAWhileAgo(doomed.id);
    const blocked = await server.api.post(
      `/v1/wallets/${created.id}/send`,
      { to: recipient, amount: "5", chain: "solana" },
      apiKey,
    );
    expect(blocked.status).toBe(403);

    await server.service.confirmer.runOnce();
    const [failed] = await db.select().from(transactions).where(eq(transactions.id, doomed.id));
    expect(failed?.status).toBe("failed");
    expect(failed?.failureReason).toMatch(/^broadcast rejected: /);

    const admitted = await server.api.post(
      `/v1/wallets/${created.id}/send`,
      { to: recipient, amount: "5", chain: "solana" },
      apiKey,
    );
    expect(admitted.status, admitted.text).toBe(201);
    expect(await solana.getBalance(recipient, usdc)).toBe(5_000_000n);
  });
  it("re-signed, does not open the recipient's token account the first did not: its owner closed it since, and the transfer fails", async () => {
    const { apiKey } = await seedAccount(server.api);
    const created = (await server.api.post("/v1/wallets", { name: "reopen", chains: ["solana"] }, apiKey))
      .body;
    await fundSolana(devnet, created.solana.address, { sol: 10n ** 9n, usdc: 5_000_000n });
    const { solana } = await devnetClients(devnet);
    const usdc = findToken(solana, "USDC");
    const recipient = await solanaKey();
    await fundSolana(devnet, recipient.address, { sol: 10n ** 8n, usdc: 1n });
    const db = server.service.store.db;

    // Planned and signed while the recipient's account was open (no rent counted), then its broadcast lost.
    const privateKey = await openStoredKey(server.service, created.id, "solana");
    const plan = await solana.planTransfer({
      from: created.solana.address,
      to: recipient.address,
      token: usdc,
      amount: 1_000_000n,
    });
    expect(plan.recipientAccountRent).toBeUndefined();
    const row = await admitSpend(
      db,
      {
        walletId: created.id,
        type: "send",
        chain: "solana",
        token: usdc,
        amount: 1_000_000n,
        from: created.solana.address,
        to: recipient.address,
        usdMicros: 1_000_000n,
      },
      { sign: () => solana.signTransfer(plan, privateKey) },
    );
    privateKey.fill(0);
    // The owner closes the account; the first transfer's blockhash runs out unlanded.
    const account = await closeTokenAccount(devnet, recipient, usdc);
    const solBefore = await solana.getBalance(created.solana.address, solana.config.nativeToken);
    devnet.advanceSolanaSlots(400);
    await server.service.confirmer.runOnce(); // dropped: rebuilt, re-signed, sent (refused)
    devnet.advanceSolanaSlots(2);
    await server.service.confirmer.runOnce();
    const [ended] = await db.select().from(transactions).where(eq(transactions.id, row.id));
    expect(ended?.status).toBe("failed");
    expect(
      solBefore - (await solana.getBalance(created.solana.address, solana.config.nativeToken)),
    ).toBeLessThanOrEqual(5_000n);
    expect((await createSolanaRpc(devnet.solana.rpcUrl).getAccountInfo(account).send()).value).toBeNull();
  });
});
