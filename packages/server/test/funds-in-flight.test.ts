/**
 * Which of an address's sends the funds check under the spend lock (checkFundsInFlight) counts, over a store
 * holding what a local chain restarted leaves: the old chain's confirmed sends keep their nonces, which the
 * new chain hands out again. Of the rows holding one nonce, the latest is the one on the chain now: it
 * counts if it is live, and an older row of that nonce (of the old chain) never does.
 *
 * The rows are written to a real store as the service leaves them; the state (a restart, then a send
 * rejected at broadcast while a later nonce was handed out, before its gap is filled) takes a restarted
 * chain and a node's refusal to reach through the API.
 */
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TokenInfo } from "../src/chains/types.ts";
import { openStore, type Store } from "../src/internal/db/store.ts";
import { checkFundsInFlight, type FundsRead } from "../src/spends/funds.ts";
import { initializedPglite } from "./support/pglite-setup.ts";
import { createFreshDatabase, STORE_KIND } from "./support/test-server.ts";

const USDC: TokenInfo = {
  symbol: "USDC",
  decimals: 6,
  address: "0x0000000000000000000000000000000000000001",
};
const ETH: TokenInfo = { symbol: "ETH", decimals: 18, address: null };
const FROM = "0x00000000000000000000000000000000000000bb";
const WALLET = "wal_fundsinflight000000001";

let store: Store;
let drop: () => Promise<void> = async () => {};
beforeAll(async () => {
  if (STORE_KIND === "postgres") {
    const database = await createFreshDatabase();
    drop = database.drop;
    store = await openStore({ databaseUrl: database.url });
  } else store = await openStore({ pgliteMemory: true, initializedFrom: initializedPglite() });
  await store.db.execute(sql`
    INSERT INTO accounts (id, email, password_hash) VALUES ('usr_fundsinflight00000001', 'flight@example.com', 'x')`);
  await store.db.execute(sql`
    INSERT INTO wallets (id, account_id, name, chains, metadata, evm_address, status, wrapped_data_key)
    VALUES (${WALLET}, 'usr_fundsinflight00000001', 'restarted', '["base"]', '{}', ${FROM}, 'active', '\\x00')`);
});
afterAll(async () => {
  await store?.close();
  await drop();
});

/** Records a send of `amount` USDC from {@link FROM} with `nonce`, `status`, recorded `minutesAgo`. */
async function recordSend(id: string, nonce: number, amount: bigint, status: string, minutesAgo: number) {
  await store.db.execute(sql`
    INSERT INTO transactions (id, wallet_id, type, chain, token, amount_atomic, decimals, from_address,
      to_address, status, created_at, nonce, raw_tx)
    VALUES (${id}, ${WALLET}, 'send', 'base', 'USDC', ${amount.toString()}, 6, ${FROM},
      '0x00000000000000000000000000000000000000cc', ${status},
      now() - ${minutesAgo} * interval '1 minute', ${nonce}, '0x00')`);
}

describe("sends counted under the lock after a local chain's restart", () => {
  it("a nonce whose latest send failed counts nothing, not the old chain's confirmed send of it", async () => {
    // The old chain: a send of 100 USDC confirmed with nonce 0, an hour ago.
    await recordSend("tx_oldchain0", 0, 100_000_000n, "confirmed", 60);
    // The new chain: sends of 1 with nonces 0 and 1; the first rejected at broadcast (its gap not yet filled).
    await recordSend("tx_newchain0", 0, 1_000_000n, "failed", 2);
    await recordSend("tx_newchain1", 1, 1_000_000n, "pending", 1);
    // A send of 5 from 10 USDC read at nonce 0 (the new chain's), handed nonce 2: only the pending 1 is in flight.
    const read: FundsRead = {
      balance: 10_000_000n,
      gas: { fee: 1n, nativeBalance: 10n ** 18n, native: ETH },
      minedNonce: 0,
      payments: new Map(),
      paymentsNewest: null,
    };
    const spend = {
      walletId: WALLET,
      type: "send" as const,
      chain: "base",
      token: USDC,
      amount: 5_000_000n,
      from: FROM,
      to: FROM,
      usdMicros: 5_000_000n,
    };
    // Before, the old chain's 100 counted for nonce 0: "balance 10, of which 101 is taken by 2 sends".
    await expect(
      store.db.transaction((tx) => checkFundsInFlight(tx, spend, read, 2)),
    ).resolves.toBeUndefined();
    // The pending one still counts: a send of 10 is refused for it.
    await expect(
      store.db.transaction((tx) => checkFundsInFlight(tx, { ...spend, amount: 10_000_000n }, read, 2)),
    ).rejects.toThrow("Insufficient USDC: balance 10, of which 1 is taken by 1 send not yet on chain");
  });
});
