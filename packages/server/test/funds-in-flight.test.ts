/**
 * Which of an address's spends the funds check under the spend lock (checkFundsInFlight) counts, and what
 * that costs, over real stores holding rows as the service leaves them.
 *
 * After a local chain restarted, the old chain's confirmed sends keep their nonces, which the new chain hands
 * out again. Of the rows holding one nonce, the latest is the one on the chain now: it counts if it is live,
 * and an older row of that nonce (of the old chain) never does. (The state, a restart then a send rejected
 * at broadcast while a later nonce was handed out, before its gap is filled, takes a restarted chain and a
 * node's refusal to reach through the API.)
 *
 * The check runs on every EVM spend while the lock is held: what it costs must not grow with the wallet's
 * history. On PostgreSQL, its statement's plan is read (EXPLAIN ANALYZE of the statement as the spend
 * prepared it) over a wallet with a long history, and the rows it visits are counted: each branch must reach
 * its rows through an index, not read the history past them nor the other addresses' spends pending across
 * the service.
 */
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ChainConfig, TokenInfo } from "../src/chains/types.ts";
import { openStore, type Store, selectRows, type Tx } from "../src/internal/db/store.ts";
import { lockSpendingPolicy } from "../src/spends/admission.ts";
import {
  checkFundsInFlight,
  type FundsRead,
  pendingSolanaSpends,
  RECENTLY_CONFIRMED_MS,
} from "../src/spends/funds.ts";
import { eventually } from "./support/eventually.ts";
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

/** The account and wallet of {@link FROM}, whose spends the tests record. */
async function seedWallet(store: Store, name: string): Promise<void> {
  await store.db.execute(sql`
    INSERT INTO accounts (id, email, password_hash) VALUES ('usr_fundsinflight00000001', 'flight@example.com', 'x')`);
  await store.db.execute(sql`
    INSERT INTO wallets (id, account_id, name, chains, metadata, evm_address, status, wrapped_data_key)
    VALUES (${WALLET}, 'usr_fundsinflight00000001', ${name}, '["base"]', '{}', ${FROM}, 'active', '\\x00')`);
}

/** A send of `amount` USDC atomic units from {@link FROM}, worth as many USD millionths. */
function usdcSend(amount: bigint) {
  return {
    walletId: WALLET,
    type: "send" as const,
    chain: "base",
    token: USDC,
    amount,
    from: FROM,
    to: FROM,
    usdMicros: amount,
  };
}

/** How many sends and how many x402 payments the wallet's history holds, all confirmed long ago. */
const HISTORY = 2000;

let store: Store;
let drop: () => Promise<void> = async () => {};
beforeAll(async () => {
  if (STORE_KIND === "postgres") {
    const database = await createFreshDatabase();
    drop = database.drop;
    store = await openStore({ databaseUrl: database.url });
  } else store = await openStore({ pgliteMemory: true, initializedFrom: initializedPglite() });
  await seedWallet(store, "restarted");
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
      lastAdmitted: null,
    };
    const spend = usdcSend(5_000_000n);
    // Before, the old chain's 100 counted for nonce 0: "balance 10, of which 101 is taken by 2 sends".
    await expect(
      store.db.transaction((tx) => checkFundsInFlight(tx, spend, read, 2)),
    ).resolves.toBeUndefined();
    // The pending one still counts: a send of 10 is refused for it.
    await expect(
      store.db.transaction((tx) => checkFundsInFlight(tx, usdcSend(10_000_000n), read, 2)),
    ).rejects.toThrow("Insufficient USDC: balance 10, of which 1 is taken by 1 send not yet on chain");
  });
});

/**
 * The funds check tells the spends admitted after a read by their admission numbers: a spend of the wallet
 * committed after another must have the higher one. The number is handed out by the statement that locks the
 * wallet's policy row, evaluated on the row it gives once locked; taken before the lock (in the locked query's
 * own columns, below its locking), a spend that waited at the lock would hold a number lower than the one
 * admitted before it, and a read between their commits would miss it. PostgreSQL only: PGlite runs one
 * transaction at a time, so nothing waits at a lock there.
 */
describe.skipIf(STORE_KIND !== "postgres")("the admission number handed out under the spend lock", () => {
  const NONCE_ADDRESS = "0x00000000000000000000000000000000000000dd";
  beforeAll(async () => {
    await store.db.execute(sql`INSERT INTO wallet_policies (wallet_id) VALUES (${WALLET})`);
  });

  /** Backends of this database waiting at a lock in the spend lock's statement. */
  async function waitingAtSpendLock(): Promise<number> {
    const [row] = await selectRows<{ waiting: number }>(
      store.db,
      sql`SELECT count(*)::int AS waiting FROM pg_stat_activity
           WHERE datname = current_database() AND wait_event_type = 'Lock'
             AND query LIKE '%FROM wallet_policies p JOIN wallets w%'`,
    );
    return row?.waiting ?? 0;
  }

  const cases = [undefined, { chain: "base", address: NONCE_ADDRESS, chainPendingNonce: 0 }].flatMap(
    (nonceFor) => [false, true].map((writes) => ({ nonceFor, writes })),
  );
  for (const { nonceFor, writes } of cases) {
    it(`is taken once the lock is held by a spend that waited for it${writes ? " while its rows were written" : ""} (${nonceFor ? "with" : "without"} an EVM nonce)`, async () => {
      let release = () => {};
      const released = new Promise<void>((resolve) => {
        release = resolve;
      });
      let lockedFirst = () => {};
      const firstLocked = new Promise<void>((resolve) => {
        lockedFirst = resolve;
      });
      // The first spend holds the lock; in the second case it writes the rows it locked (as a policy change
      // or an archive does) before it commits, and the waiting statement reads them again (EvalPlanQual).
      const first = store.db.transaction(async (tx) => {
        const { admissionSeq } = await lockSpendingPolicy(tx, WALLET, nonceFor);
        lockedFirst();
        await released;
        if (writes) {
          await tx.execute(sql`UPDATE wallet_policies SET updated_at = now() WHERE wallet_id = ${WALLET}`);
          await tx.execute(sql`UPDATE wallets SET name = name WHERE id = ${WALLET}`);
        }
        return admissionSeq;
      });
      await firstLocked;
      const second = store.db.transaction(
        async (tx) => (await lockSpendingPolicy(tx, WALLET, nonceFor)).admissionSeq,
      );
      await eventually(async () => (await waitingAtSpendLock()) === 1, {
        describe: "the second spend to wait at the lock",
      });
      // A number taken while the second waits: the second's must come after it.
      const [meanwhile] = await selectRows<{ seq: string }>(
        store.db,
        sql`SELECT nextval('transactions_admission_seq')::text AS seq`,
      );
      release();
      const [firstSeq, secondSeq] = await Promise.all([first, second]);
      const between = BigInt(meanwhile?.seq ?? "0");
      expect(firstSeq).toBeLessThan(between);
      expect(secondSeq).toBeGreaterThan(between);
    });
  }
});

describe.skipIf(STORE_KIND !== "postgres")("the funds check's statement over a long history", () => {
  let store: Store;
  let drop: () => Promise<void>;
  beforeAll(async () => {
    const database = await createFreshDatabase();
    drop = database.drop;
    store = await openStore({ databaseUrl: database.url });
    await seedWallet(store, "long history");
    // Sends with nonces 0 to HISTORY - 1, and as many x402 payments, a second apart, the last an hour ago,
    // admitted in turn.
    await store.db.execute(sql`
      INSERT INTO transactions (id, wallet_id, type, chain, token, amount_atomic, decimals, from_address,
        to_address, status, created_at, nonce, raw_tx, admission_seq)
      SELECT 'tx_send' || g, ${WALLET}, 'send', 'base', 'USDC', 1, 6, ${FROM}, ${FROM}, 'confirmed',
        date_trunc('milliseconds', now()) - interval '1 hour' - (${HISTORY} - g) * interval '1 second', g, '0x00',
        2 * g + 1
      FROM generate_series(0, ${HISTORY - 1}) g`);
    await store.db.execute(sql`
      INSERT INTO transactions (id, wallet_id, type, chain, token, amount_atomic, decimals, from_address,
        to_address, status, created_at, admission_seq)
      SELECT 'tx_x402' || g, ${WALLET}, 'x402', 'base', 'USDC', 1, 6, ${FROM}, ${FROM}, 'confirmed',
        date_trunc('milliseconds', now()) - interval '1 hour' - (${HISTORY} - g) * interval '1 second', 2 * g + 2
      FROM generate_series(0, ${HISTORY - 1}) g`);
    // Other wallets' spends pending across the service, as many: none of them is this address's.
    await store.db.execute(sql`
      INSERT INTO accounts (id, email, password_hash) VALUES ('usr_fundscheckcost00000002', 'busy@example.com', 'x')`);
    await store.db.execute(sql`
      INSERT INTO wallets (id, account_id, name, chains, metadata, evm_address, status, wrapped_data_key)
      SELECT 'wal_busy' || g, 'usr_fundscheckcost00000002', 'busy', '["base"]', '{}',
        '0x' || lpad(to_hex(g), 40, '0'), 'active', '\\x00'
      FROM generate_series(1, 100) g`);
    await store.db.execute(sql`
      INSERT INTO transactions (id, wallet_id, type, chain, token, amount_atomic, decimals, from_address,
        to_address, status, created_at, admission_seq)
      SELECT 'tx_busy' || g, 'wal_busy' || (g % 100 + 1), 'x402', 'base', 'USDC', 1, 6,
        '0x' || lpad(to_hex(g % 100 + 1), 40, '0'), ${FROM}, 'pending',
        date_trunc('milliseconds', now()) - g * interval '1 millisecond', ${2 * HISTORY} + g
      FROM generate_series(1, ${HISTORY}) g`);
    await store.db.execute(
      sql`INSERT INTO evm_nonces (chain, address, next_nonce) VALUES ('base', ${FROM}, ${HISTORY})`,
    );
    await store.db.execute(sql`ANALYZE transactions`);
  });
  afterAll(async () => {
    await store?.close();
    await drop?.();
  });

  for (const planCacheMode of ["force_custom_plan", "force_generic_plan"]) {
    it(`visits the spends in flight, not the history (${planCacheMode})`, async () => {
      // What a send of 1 USDC read: the nonce past the history, the wallet's last spend admitted, none pending.
      const lastAdmitted = BigInt(2 * HISTORY);
      const read: FundsRead = {
        balance: 10n ** 9n,
        gas: { fee: 1n, nativeBalance: 10n ** 18n, native: ETH },
        minedNonce: HISTORY,
        payments: new Map(),
        lastAdmitted,
      };
      const spend = usdcSend(1n);
      const visited = await rowsVisitedBy(
        store,
        planCacheMode,
        // Prepares the statement on this connection, and finds nothing in flight.
        (tx) => checkFundsInFlight(tx, spend, read, HISTORY),
        `spends_in_flight('base', '${FROM}', ${HISTORY}, ${HISTORY}, 'USDC', '[]', '${WALLET}', true,
          ${lastAdmitted}, '[]')`,
      );
      // Read through an index from the last spend admitted at the read, the branch of payments admitted since
      // visits none; reading the wallet's payments and filtering them visited all HISTORY. The branch of the
      // address's pending payments visits none either; the pending rows' index read every pending spend.
      expect(visited).toBeLessThan(HISTORY / 10);
    });
  }
});

describe.skipIf(STORE_KIND !== "postgres")("the Solana funds check's statement over a long history", () => {
  const SOLANA_FROM = "So1anaFundsInF1ight11111111111111111111111";
  const SOLANA_WALLET = "wal_fundsinflightsolana001";
  const SOL: TokenInfo = { symbol: "SOL", decimals: 9, address: null };
  let store: Store;
  let drop: () => Promise<void>;
  beforeAll(async () => {
    const database = await createFreshDatabase();
    drop = database.drop;
    store = await openStore({ databaseUrl: database.url });
    await store.db.execute(sql`
      INSERT INTO accounts (id, email, password_hash) VALUES ('usr_fundsinflight00000001', 'flight@example.com', 'x')`);
    await store.db.execute(sql`
      INSERT INTO wallets (id, account_id, name, chains, metadata, solana_address, status, wrapped_data_key)
      VALUES (${SOLANA_WALLET}, 'usr_fundsinflight00000001', 'long history', '["solana"]', '{}', ${SOLANA_FROM},
        'active', '\\x00')`);
    // Sends a second apart, admitted in turn, all confirmed, the last an hour ago.
    await store.db.execute(sql`
      INSERT INTO transactions (id, wallet_id, type, chain, token, amount_atomic, decimals, from_address,
        to_address, status, created_at, tx_hash, admission_seq)
      SELECT 'tx_solsend' || g, ${SOLANA_WALLET}, 'send', 'solana', 'SOL', 1, 9, ${SOLANA_FROM}, ${SOLANA_FROM},
        'confirmed', date_trunc('milliseconds', now()) - interval '1 hour' - (${HISTORY} - g) * interval '1 second',
        'sig' || g, g + 1
      FROM generate_series(0, ${HISTORY - 1}) g`);
    // Other wallets' sends pending across the service, as many.
    await store.db.execute(sql`
      INSERT INTO wallets (id, account_id, name, chains, metadata, solana_address, status, wrapped_data_key)
      VALUES ('wal_solbusy', 'usr_fundsinflight00000001', 'busy', '["solana"]', '{}', 'busy', 'active', '\\x00')`);
    await store.db.execute(sql`
      INSERT INTO transactions (id, wallet_id, type, chain, token, amount_atomic, decimals, from_address,
        to_address, status, created_at, tx_hash, admission_seq)
      SELECT 'tx_solbusy' || g, 'wal_solbusy', 'send', 'solana', 'SOL', 1, 9, 'busy' || (g % 100), ${SOLANA_FROM},
        'pending', date_trunc('milliseconds', now()) - g * interval '1 millisecond', 'busysig' || g, ${HISTORY} + g
      FROM generate_series(1, ${HISTORY}) g`);
    await store.db.execute(sql`ANALYZE transactions`);
  });
  afterAll(async () => {
    await store?.close();
    await drop?.();
  });

  for (const planCacheMode of ["force_custom_plan", "force_generic_plan"]) {
    it(`visits the sends in flight, not the history (${planCacheMode})`, async () => {
      // What a send of 1 lamport read: none of its sends pending, two confirmed lately whose statuses read
      // not landed (a node behind), the last admitted its last confirmed one.
      const lastAdmitted = BigInt(HISTORY);
      const readUnlanded = ["tx_solsend1", "tx_solsend2"];
      const read: FundsRead = {
        balance: 10n ** 9n,
        gas: { fee: 5_000n, nativeBalance: 10n ** 9n, native: SOL },
        spends: {
          landed: new Map(readUnlanded.map((id) => [id, false])),
          lastAdmitted,
        },
        rents: { tokenAccountRent: 2_039_280n, rentMinimum: 890_880n },
      };
      const spend = {
        walletId: SOLANA_WALLET,
        type: "send" as const,
        chain: "solana",
        token: SOL,
        amount: 1n,
        from: SOLANA_FROM,
        to: SOLANA_FROM,
        usdMicros: 0n,
      };
      const ids = JSON.stringify(readUnlanded);
      const visited = await rowsVisitedBy(
        store,
        planCacheMode,
        // Prepares the statement on this connection, and finds the two read not landed in flight.
        (tx) => checkFundsInFlight(tx, spend, read),
        `solana_spends_in_flight('solana', '${SOLANA_FROM}', '${ids}', '${SOLANA_WALLET}', ${lastAdmitted},
          '${ids}')`,
      );
      // Each branch seeks to its rows: the sender's pending ones (none among the service's), the ids read
      // (two, by the primary key), the wallet's sends admitted after the last at the read (none); reading the wallet's sends
      // visited all of them.
      expect(visited).toBeLessThan(HISTORY / 10);
    });

    it(`reads the sender's pending spends and the wallet's latest sends before the plan, not the history (${planCacheMode})`, async () => {
      const solana: ChainConfig = {
        name: "solana",
        kind: "solana",
        network: "solana:local",
        rpcUrl: "http://127.0.0.1:1",
        nativeToken: SOL,
        tokens: [SOL],
        testnet: true,
      };
      const visited = await rowsVisitedBy(
        store,
        planCacheMode,
        // Prepares the statement on this connection: nothing pending, no send confirmed lately.
        async (tx) => {
          const read = await pendingSolanaSpends(tx, solana, { walletId: SOLANA_WALLET, from: SOLANA_FROM });
          expect(read?.ids).toEqual([]);
        },
        `pending_solana_spends('solana', '${SOLANA_FROM}', '${SOLANA_WALLET}',
          '${new Date(Date.now() - RECENTLY_CONFIRMED_MS).toISOString()}')`,
      );
      // The sender's pending rows by their index (none among the service's), the wallet's latest
      // RECENT_SENDS_READ and its last admitted by the index of its spends by chain in the order admitted.
      expect(visited).toBeLessThan(HISTORY / 10);
    });
  }
});

/**
 * The rows a prepared statement's plan reads (see {@link rowsVisited}), under `planCacheMode`: `prepare` runs
 * the code that prepares it on the transaction's connection, then `execute` (the statement's name and its
 * parameters, as SQL) is explained as run.
 */
async function rowsVisitedBy(
  store: Store,
  planCacheMode: string,
  prepare: (tx: Tx) => Promise<unknown>,
  execute: string,
): Promise<number> {
  return store.db.transaction(async (tx) => {
    await tx.execute(sql.raw(`SET LOCAL plan_cache_mode = ${planCacheMode}`));
    await prepare(tx);
    const [plan] = await selectRows<{ "QUERY PLAN": unknown }>(
      tx,
      sql.raw(`EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE ${execute}`),
    );
    return rowsVisited(plan?.["QUERY PLAN"]);
  });
}

/** The rows a plan's nodes read, kept or removed by their filters, summed over its tree. */
function rowsVisited(plan: unknown): number {
  const nodes: Record<string, unknown>[] = [];
  const visit = (node: unknown) => {
    if (!node || typeof node !== "object") return;
    const record = node as Record<string, unknown>;
    if (typeof record["Node Type"] === "string") nodes.push(record);
    for (const value of Object.values(record)) {
      if (Array.isArray(value)) value.forEach(visit);
      else if (value && typeof value === "object") visit(value);
    }
  };
  visit(plan);
  const count = (node: Record<string, unknown>, key: string) => Number(node[key] ?? 0);
  return nodes
    .filter((node) => String(node["Node Type"]).includes("Scan"))
    .reduce(
      (sum, node) =>
        sum +
        count(node, "Actual Rows") * Math.max(1, count(node, "Actual Loops")) +
        count(node, "Rows Removed by Filter") +
        count(node, "Rows Removed by Index Recheck"),
      0,
    );
}
