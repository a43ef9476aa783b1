/**
 * Send benchmarks on the local chains: admitted sends/s end to end, the policy check's p99 under contention,
 * and send latency as a wallet's history grows. Prints figures; asserts nothing.
 */
import { randomBytes } from "node:crypto";
import { fundEvm, fundSolana, startDevnet } from "@svc/devnet";
import { eq, sql } from "drizzle-orm";
import { wallets } from "../src/internal/db/schema.ts";
import type { StoreLocation } from "../src/internal/db/store.ts";
import { admitSpend } from "../src/spends/admission.ts";
import { ApiClient, seedAccount } from "../test/support/api-client.ts";
import { startBenchService } from "./service.ts";

const USDC = 1_000_000n;

function percentile(values: number[], q: number): string {
  const sorted = [...values].sort((a, b) => a - b);
  return (sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0).toFixed(1);
}

/** Runs `clients` loops that each send until `total` sends have been made; returns admitted sends per second. */
async function sendRate(
  api: ApiClient,
  apiKey: string,
  walletId: string,
  body: Record<string, unknown>,
  clients: number,
  total: number,
) {
  let issued = 0;
  let admitted = 0;
  const latencies: number[] = [];
  const start = performance.now();
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (issued < total) {
        issued++;
        const t = performance.now();
        const response = await api.post(`/v1/wallets/${walletId}/send`, body, apiKey);
        latencies.push(performance.now() - t);
        if (response.status === 201) admitted++;
        else throw new Error(`send refused: ${response.text}`);
      }
    }),
  );
  const seconds = (performance.now() - start) / 1000;
  return {
    rate: (admitted / seconds).toFixed(1),
    p50: percentile(latencies, 0.5),
    p99: percentile(latencies, 0.99),
  };
}

export async function benchSends(label: string, store: StoreLocation): Promise<void> {
  const devnet = await startDevnet();
  const service = await startBenchService(store, devnet);
  try {
    const api = new ApiClient(service.url);
    const { apiKey } = await seedAccount(api);
    const newWallet = async () => {
      const wallet = (await api.post("/v1/wallets", { name: "bench", chains: ["base", "solana"] }, apiKey))
        .body;
      await fundEvm(devnet, wallet.evm.address, { eth: 10n ** 19n, usdc: 1_000_000n * USDC });
      await fundSolana(devnet, wallet.solana.address, { sol: 100n * 10n ** 9n, usdc: 1_000_000n * USDC });
      return wallet as { id: string; evm: { address: string }; solana: { address: string } };
    };

    // 1. Admitted sends per second, end to end (HTTP 201 after the broadcast).
    const evmTo = `0x${randomBytes(20).toString("hex")}`;
    const solanaTo = (await newWallet()).solana.address;
    for (const [chain, to] of [
      ["base", evmTo],
      ["solana", solanaTo],
    ] as const) {
      for (const clients of [1, 16]) {
        const wallet = await newWallet();
        const result = await sendRate(
          api,
          apiKey,
          wallet.id,
          { to, amount: "0.01", chain },
          clients,
          clients === 1 ? 40 : 160,
        );
        console.log(
          `[${label}] USDC sends on local ${chain}, ${clients} client(s): ${result.rate} admitted sends/s (latency p50 ${result.p50} ms, p99 ${result.p99} ms)`,
        );
      }
    }

    // 2. The policy check alone (lock the policy row, sum the rolling window, decide) under 64 clients.
    const wallet = await newWallet();
    await api.request("PATCH", `/v1/wallets/${wallet.id}/policy`, {
      token: apiKey,
      body: { dailyLimit: "0.000001" },
    });
    const [row] = await service.store.db.select().from(wallets).where(eq(wallets.id, wallet.id));
    if (!row) throw new Error("no wallet");
    const usdc = { symbol: "USDC", address: devnet.evm.usdc, decimals: 6, usdPrice: "1" };
    const checks: number[] = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: 64 }, async () => {
        while (next++ < 3200) {
          const t = performance.now();
          await admitSpend(
            service.store.db,
            {
              walletId: wallet.id,
              type: "send",
              chain: "base",
              token: usdc,
              amount: USDC,
              from: wallet.evm.address,
              to: evmTo,
              usdMicros: USDC,
            },
            { sign: () => Promise.reject(new Error("never reached: the check refuses first")) },
          ).catch(() => {});
          checks.push(performance.now() - t);
        }
      }),
    );
    console.log(
      `[${label}] policy check (row lock + 24 h window + verdict), 64 concurrent clients, ${checks.length} checks: p50 ${percentile(checks, 0.5)} ms, p99 ${percentile(checks, 0.99)} ms`,
    );

    // 3. Send latency as the wallet's history (inside the 24 h window) grows.
    const deep = await newWallet();
    await api.request("PATCH", `/v1/wallets/${deep.id}/policy`, {
      token: apiKey,
      body: { dailyLimit: "1000000000" },
    });
    let seeded = 0;
    for (const target of [0, 10_000, 100_000]) {
      if (target > seeded) {
        await service.store.db.execute(sql`
          INSERT INTO transactions (id, wallet_id, type, chain, token, amount_atomic, decimals, from_address, to_address, tx_hash, status, usd_micros, created_at)
          SELECT 'tx_seed' || ${deep.id} || g, ${deep.id}, 'send', 'base', 'USDC', 1, 6, ${deep.evm.address}, 'x', 'h' || g, 'confirmed', 1,
                 now() - ((g % 80000) || ' seconds')::interval
          FROM generate_series(${seeded + 1}::int, ${target}::int) AS g`);
        // The hour buckets the service keeps beside each spend, rebuilt for the seeded rows.
        await service.store.db.execute(sql`DELETE FROM spend_hours WHERE wallet_id = ${deep.id}`);
        await service.store.db.execute(sql`
          INSERT INTO spend_hours (wallet_id, hour, usd_micros)
          SELECT wallet_id, date_bin('1 hour', created_at, TIMESTAMPTZ '2000-01-01 00:00:00+00'), sum(usd_micros)
          FROM transactions WHERE wallet_id = ${deep.id} AND status IN ('pending', 'confirmed') GROUP BY 1, 2`);
        await service.store.db.execute(sql`ANALYZE transactions`);
        seeded = target;
      }
      const result = await sendRate(
        api,
        apiKey,
        deep.id,
        { to: evmTo, amount: "0.01", chain: "base" },
        1,
        30,
      );
      console.log(
        `[${label}] send latency with ${target.toLocaleString("en")} sends in the wallet's 24 h window: p50 ${result.p50} ms, p99 ${result.p99} ms`,
      );
    }
  } finally {
    await service.close();
    await devnet.stop();
  }
}
