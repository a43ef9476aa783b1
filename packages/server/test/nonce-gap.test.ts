import { fundEvm } from "@svc/devnet";
import { eq, sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { transactions, wallets } from "../src/internal/db/schema.ts";
import { selectRows } from "../src/internal/db/store.ts";
import { admitSpend, failSpend } from "../src/spends/admission.ts";
import { findToken, planFundedTransfer } from "../src/spends/transfer.ts";
import { devnetClients, evmKey } from "./support/chains.ts";
import { eventually } from "./support/eventually.ts";
import { openStoredKey } from "./support/keys.ts";
import {
  createTestServer,
  STORE_KIND,
  seedAccount,
  sharedDevnet,
  type TestServer,
} from "./support/test-server.ts";

let server: TestServer;
/** The confirmer makes its start-up pass only, and the watcher too: this test drives the confirmer by hand. */
const QUIET = { SVC_CONFIRMER_INTERVAL_MS: "3600000", SVC_WATCH_INTERVAL_MS: "3600000" };

beforeAll(async () => {
  await sharedDevnet();
  server = await createTestServer({ env: QUIET });
});
afterAll(() => server.close());

/**
 * A wallet whose nonce 0 was handed out and whose spend failed before the process gave the nonce back (a
 * crash there), and whose next send, given nonce 1, is stuck behind the gap.
 */
async function walletStuckBehindGap(api: TestServer["api"], db: TestServer["service"]["store"]["db"]) {
  const devnet = await sharedDevnet();
  const { apiKey } = await seedAccount(api);
  const created = (await api.post("/v1/wallets", { name: "gap", chains: ["base"] }, apiKey)).body;
  await fundEvm(devnet, created.evm.address, { eth: 10n ** 18n, usdc: 10_000_000n });
  const { base } = await devnetClients(devnet);
  const usdc = findToken(base, "USDC");
  const recipient = evmKey().address;
  const privateKey = await openStoredKey(server.service, created.id, "evm");
  const plan = await planFundedTransfer(db, base, created.id, {
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
      plan,
      sign: (nonce) => base.signTransfer(plan, privateKey, nonce),
    },
  );
  privateKey.fill(0);
  expect(lost.nonce).toBe(0);
  await failSpend(db, lost.id, "test: lost before it was broadcast");
  const stuck = await api.post(
    `/v1/wallets/${created.id}/send`,
    { to: recipient, amount: "2", chain: "base" },
    apiKey,
  );
  expect(stuck.status, stuck.text).toBe(201);
  return {
    apiKey,
    wallet: created as { id: string; evm: { address: string } },
    stuck: stuck.body,
    base,
    usdc,
    recipient,
  };
}

/** The zero-value transfers of a wallet to itself: the fillers of its nonce gaps. */
async function fillersOf(db: TestServer["service"]["store"]["db"], walletId: string, address: string) {
  const rows = await db.select().from(transactions).where(eq(transactions.walletId, walletId));
  return rows.filter((row) => row.amountAtomic === 0n && row.toAddress === address);
}

describe("an EVM nonce that will never be mined", () => {
  it("is filled by the confirmer, so the sends after it are mined", async () => {
    const db = server.service.store.db;
    const { apiKey, wallet, stuck, base, usdc, recipient } = await walletStuckBehindGap(server.api, db);
    await server.service.confirmer.runOnce();
    await server.service.confirmer.runOnce();
    const [sent] = await db.select().from(transactions).where(eq(transactions.id, stuck.id));
    expect(sent?.status).toBe("confirmed");
    expect(await base.getBalance(recipient, usdc)).toBe(2_000_000n);
    // The gap was filled by a recorded zero-value transfer to the wallet itself, at nonce 0.
    const history = await server.api.get(`/v1/wallets/${wallet.id}/transactions?type=send`, apiKey);
    const filler = history.body.data.find(
      (t: { amount: string; to: string }) => t.amount === "0" && t.to === wallet.evm.address,
    );
    expect(filler).toMatchObject({ token: "ETH", status: "confirmed" });
  });

  it.runIf(STORE_KIND === "postgres")(
    "is filled once when two instances' confirmers find it at once",
    async () => {
      const other = await createTestServer({ env: QUIET, store: server.storeLocation });
      try {
        const db = server.service.store.db;
        const { wallet, stuck } = await walletStuckBehindGap(server.api, db);
        // Both confirmers have read the chain and found the gap before either records its filler: the
        // wallet's row is locked here (a filler's insert checks its wallet) until both wait on a lock.
        let passes: Promise<unknown> | undefined;
        await db.transaction(async (tx) => {
          await tx.select().from(wallets).where(eq(wallets.id, wallet.id)).for("update");
          passes = Promise.all([server.service.confirmer.runOnce(), other.service.confirmer.runOnce()]);
          await eventually(async () => {
            const waiting = await selectRows<{ pid: number }>(
              db,
              sql`SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
            );
            return waiting.length >= 2 ? true : undefined;
          });
        });
        await passes;
        await server.service.confirmer.runOnce();
        const fillers = await fillersOf(db, wallet.id, wallet.evm.address);
        expect(fillers.map((row) => [row.nonce, row.status])).toEqual([[0, "confirmed"]]);
        const [sent] = await db.select().from(transactions).where(eq(transactions.id, stuck.id));
        expect(sent?.status).toBe("confirmed");
      } finally {
        await other.close();
      }
    },
  );
});
