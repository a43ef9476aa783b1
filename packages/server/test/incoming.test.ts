import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Address } from "@solana/kit";
import { fundEvm, fundSolana } from "@svc/devnet";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { StoreLocation } from "../src/internal/db/store.ts";
import { selectRows } from "../src/internal/db/store.ts";
import { formatUnits, parseUnitsStrict } from "../src/internal/money.ts";
import { eventually } from "./support/eventually.ts";
import { unpackInitializedPglite } from "./support/pglite-setup.ts";
import { RpcGate } from "./support/rpc-gate.ts";
import { waitForSettled } from "./support/spends.ts";
import {
  type ApiClient,
  createFreshDatabase,
  createTestServer,
  evmThroughGate,
  STORE_KIND,
  seedAccount,
  sharedDevnet,
  solanaThroughGate,
  type TestServer,
} from "./support/test-server.ts";

interface WalletView {
  id: string;
  evm: { address: `0x${string}` };
  solana: { address: Address };
}

async function createWallet(api: ApiClient, key: string, name = "watched"): Promise<WalletView> {
  const response = await api.post("/v1/wallets", { name, chains: ["base", "solana"] }, key);
  expect(response.status).toBe(201);
  return response.body;
}

async function history(api: ApiClient, key: string, walletId: string) {
  const response = await api.get(`/v1/wallets/${walletId}/transactions?limit=100`, key);
  expect(response.status).toBe(200);
  return response.body as { data: Record<string, string>[]; total: number };
}

/** Waits until the wallet's history holds `count` rows, then returns it. */
async function historyOf(api: ApiClient, key: string, walletId: string, count: number) {
  return eventually(async () => {
    const page = await history(api, key, walletId);
    return page.data.length >= count ? page : undefined;
  });
}

/** A fresh store that outlives one server: a PGlite data directory, or a fresh PostgreSQL database. */
async function durableStore(): Promise<{ location: StoreLocation; drop(): Promise<void> }> {
  if (STORE_KIND === "postgres") {
    const db = await createFreshDatabase();
    return { location: { databaseUrl: db.url }, drop: db.drop };
  }
  const dir = mkdtempSync(join(tmpdir(), "svc-incoming-"));
  const pgliteDir = join(dir, "pg");
  unpackInitializedPglite(pgliteDir);
  return { location: { pgliteDir }, drop: async () => rmSync(dir, { recursive: true, force: true }) };
}

/** The rows of `walletId` keyed as the unique index keys them, straight from the store. */
async function storedReceives(server: TestServer, walletId: string) {
  const result = (await server.service.store.db.execute(
    sql`SELECT chain, tx_hash, transfer_index, token, amount_atomic::text AS amount FROM transactions
        WHERE wallet_id = ${walletId} AND type = 'receive' ORDER BY chain, tx_hash, transfer_index`,
  )) as unknown as {
    rows: { chain: string; tx_hash: string; transfer_index: number; token: string; amount: string }[];
  };
  return result.rows;
}

describe("incoming transfers", () => {
  let server: TestServer;
  let apiKey: string;
  beforeAll(async () => {
    server = await createTestServer();
    ({ apiKey } = await seedAccount(server.api));
  });
  afterAll(() => server.close());

  it("records transfers sent from outside the service as one confirmed receive each", async () => {
    const devnet = await sharedDevnet();
    const wallet = await createWallet(server.api, apiKey);
    const evm = await fundEvm(devnet, wallet.evm.address, { eth: 2n * 10n ** 15n, usdc: 7_250_000n });
    const sol = await fundSolana(devnet, wallet.solana.address, { sol: 5_000_000n, usdc: 1_000_000n });
    const page = await historyOf(server.api, apiKey, wallet.id, 4);
    const rows = page.data
      .map((t) => ({
        chain: t.chain,
        token: t.token,
        amount: t.amount,
        txHash: t.txHash,
        from: t.from,
        to: t.to,
        type: t.type,
        status: t.status,
      }))
      .sort((a, b) => `${a.chain}${a.token}`.localeCompare(`${b.chain}${b.token}`));
    const treasury = { base: devnet.treasury.evm.address, solana: devnet.treasury.solana.address };
    const receive = { type: "receive", status: "confirmed" };
    expect(rows).toEqual([
      {
        chain: "base",
        token: "ETH",
        amount: "0.002",
        txHash: evm.ethTx,
        from: treasury.base,
        to: wallet.evm.address,
        ...receive,
      },
      {
        chain: "base",
        token: "USDC",
        amount: "7.25",
        txHash: evm.usdcTx,
        from: treasury.base,
        to: wallet.evm.address,
        ...receive,
      },
      {
        chain: "solana",
        token: "SOL",
        amount: "0.005",
        txHash: sol.solTx,
        from: treasury.solana,
        to: wallet.solana.address,
        ...receive,
      },
      {
        chain: "solana",
        token: "USDC",
        amount: "1",
        txHash: sol.usdcTx,
        from: treasury.solana,
        to: wallet.solana.address,
        ...receive,
      },
    ]);
    expect(page.total).toBe(4);
    for (const t of page.data) expect(t.confirmedAt).toBeTruthy();
  });

  it("records a send between two wallets of the service as a receive of the recipient only", async () => {
    const from = await createWallet(server.api, apiKey, "payer");
    const to = await createWallet(server.api, apiKey, "payee");
    for (const token of ["USDC", "ETH"]) {
      const paid = await server.api.post(
        `/v1/wallets/${from.id}/faucet`,
        { chain: "base", token, amount: "5" },
        apiKey,
      );
      expect(paid.status).toBe(201);
    }
    const sent = await server.api.post(
      `/v1/wallets/${from.id}/send`,
      { to: to.evm.address, amount: "1.5", token: "USDC", chain: "base" },
      apiKey,
    );
    expect(sent.status).toBe(201);
    const received = await historyOf(server.api, apiKey, to.id, 1);
    expect(received.data).toEqual([
      expect.objectContaining({
        type: "receive",
        amount: "1.5",
        token: "USDC",
        from: from.evm.address,
        txHash: sent.body.txHash,
      }),
    ]);
    // The payer has its two faucet receives and its send; no receive of its own send.
    const payer = await history(server.api, apiKey, from.id);
    expect(payer.data.filter((t) => t.txHash === sent.body.txHash).map((t) => t.type)).toEqual(["send"]);
    expect(payer.data.filter((t) => t.type === "receive")).toHaveLength(2);
  });

  it.each(["base", "solana"] as const)(
    "%s: a wallet paying its own address has the receive recorded beside the send, so the history sums to the balance",
    async (chain) => {
      const wallet = await createWallet(server.api, apiKey, "self");
      for (const token of ["USDC", chain === "base" ? "ETH" : "SOL"]) {
        const paid = await server.api.post(
          `/v1/wallets/${wallet.id}/faucet`,
          { chain, token, amount: "5" },
          apiKey,
        );
        expect(paid.status, paid.text).toBe(201);
      }
      const own = chain === "base" ? wallet.evm.address : wallet.solana.address;
      const sent = await server.api.post(
        `/v1/wallets/${wallet.id}/send`,
        { to: own, amount: "1.5", token: "USDC", chain },
        apiKey,
      );
      expect(sent.status, sent.text).toBe(201);
      await waitForSettled(server.api, apiKey, sent.body.id);
      // A transfer in after it, once recorded, shows the watcher has scanned past the send.
      const devnet = await sharedDevnet();
      const marker =
        chain === "base"
          ? (await fundEvm(devnet, wallet.evm.address, { usdc: 1n })).usdcTx
          : (await fundSolana(devnet, wallet.solana.address, { usdc: 1n })).usdcTx;
      const rows = await eventually(async () => {
        const page = await history(server.api, apiKey, wallet.id);
        return page.data.some((t) => t.txHash === marker) && page.data;
      });
      // Before, only the send was recorded: the history said 1.5 USDC had left a wallet that still held it.
      expect(
        rows
          .filter((t) => t.txHash === sent.body.txHash)
          .map((t) => [t.type, t.amount])
          .sort(),
      ).toEqual([
        ["receive", "1.5"],
        ["send", "1.5"],
      ]);
      const usdc = rows
        .filter((t) => t.token === "USDC" && t.status === "confirmed")
        .reduce(
          (sum, t) => sum + (t.type === "receive" ? 1n : -1n) * (parseUnitsStrict(t.amount ?? "", 6) ?? 0n),
          0n,
        );
      const balance = await server.api.get(`/v1/wallets/${wallet.id}/balance`, apiKey);
      const shown = balance.body.balances.find(
        (b: { chain: string; token: string }) => b.chain === chain && b.token === "USDC",
      );
      expect(shown.amount).toBe(formatUnits(usdc, 6));
    },
  );
});

describe("incoming transfers across a restart", () => {
  it("records transfers made while the service was down once, and nothing twice", async () => {
    const devnet = await sharedDevnet();
    const store = await durableStore();
    try {
      const first = await createTestServer({ store: store.location });
      const { apiKey } = await seedAccount(first.api);
      const wallet = await createWallet(first.api, apiKey);
      await fundEvm(devnet, wallet.evm.address, { usdc: 1_000_000n });
      await fundSolana(devnet, wallet.solana.address, { usdc: 2_000_000n });
      await historyOf(first.api, apiKey, wallet.id, 2);
      await first.close();

      // While no service runs: more transfers on both chains.
      await fundEvm(devnet, wallet.evm.address, { eth: 3n * 10n ** 15n, usdc: 3_000_000n });
      await fundSolana(devnet, wallet.solana.address, { sol: 4_000_000n, usdc: 4_000_000n });

      const second = await createTestServer({ store: store.location });
      try {
        const page = await historyOf(second.api, apiKey, wallet.id, 6);
        // One more transfer after the restart, so the watcher has certainly scanned past the others again.
        await fundEvm(devnet, wallet.evm.address, { usdc: 5_000_000n });
        await fundSolana(devnet, wallet.solana.address, { usdc: 6_000_000n });
        const after = await historyOf(second.api, apiKey, wallet.id, 8);
        expect(page.data.map((t) => t.amount).sort()).toEqual(["0.003", "0.004", "1", "2", "3", "4"]);
        expect(after.total).toBe(8);
        expect(after.data.map((t) => `${t.chain}:${t.token}:${t.amount}`).sort()).toEqual([
          "base:ETH:0.003",
          "base:USDC:1",
          "base:USDC:3",
          "base:USDC:5",
          "solana:SOL:0.004",
          "solana:USDC:2",
          "solana:USDC:4",
          "solana:USDC:6",
        ]);
        expect(new Set(after.data.map((t) => t.id)).size).toBe(8);
      } finally {
        await second.close();
      }
    } finally {
      await store.drop();
    }
  });
});

describe.runIf(STORE_KIND === "postgres")("incoming transfers with two instances on one PostgreSQL", () => {
  it("records every transfer exactly once and keeps the history total exact", async () => {
    const devnet = await sharedDevnet();
    const a = await createTestServer();
    const b = await createTestServer({ store: a.storeLocation });
    try {
      const { apiKey } = await seedAccount(a.api);
      const wallets = [await createWallet(a.api, apiKey, "one"), await createWallet(b.api, apiKey, "two")];
      for (let round = 1; round <= 3; round++) {
        for (const wallet of wallets) {
          await fundEvm(devnet, wallet.evm.address, { eth: BigInt(round) * 10n ** 12n, usdc: BigInt(round) });
          await fundSolana(devnet, wallet.solana.address, {
            sol: BigInt(round) * 1_000_000n,
            usdc: BigInt(round),
          });
        }
      }
      for (const wallet of wallets) {
        // Both instances have scanned (they answer from the same store); wait for all 12, then for a marker
        // transfer after them, so every watcher pass covering them has run.
        await historyOf(b.api, apiKey, wallet.id, 12);
      }
      const marker = await createWallet(a.api, apiKey, "marker");
      await fundEvm(devnet, marker.evm.address, { usdc: 1n });
      await fundSolana(devnet, marker.solana.address, { usdc: 1n });
      await historyOf(a.api, apiKey, marker.id, 2);
      for (const wallet of wallets) {
        const page = await history(a.api, apiKey, wallet.id);
        expect(page.total).toBe(12);
        expect(page.data).toHaveLength(12);
        const rows = await storedReceives(a, wallet.id);
        expect(new Set(rows.map((r) => `${r.chain}:${r.tx_hash}:${r.transfer_index}`)).size).toBe(12);
      }
    } finally {
      await b.close();
      await a.close();
    }
  });
});

describe("a node that answers a head below the scanned blocks (one lagging behind a load balancer)", () => {
  const chains = [
    {
      chain: "base",
      headMethod: "eth_blockNumber",
      lowHead: (head: bigint) => `0x${head.toString(16)}`,
      env: async (gate: RpcGate) => evmThroughGate(gate),
      target: (devnet: Awaited<ReturnType<typeof sharedDevnet>>) => devnet.evm.rpcUrl,
      fund: (devnet: Awaited<ReturnType<typeof sharedDevnet>>, wallet: WalletView) =>
        fundEvm(devnet, wallet.evm.address, { eth: 10n ** 15n }),
    },
    {
      chain: "solana",
      headMethod: "getSlot",
      lowHead: (head: bigint) => Number(head),
      env: async (gate: RpcGate) => solanaThroughGate(gate),
      target: (devnet: Awaited<ReturnType<typeof sharedDevnet>>) => devnet.solana.rpcUrl,
      fund: (devnet: Awaited<ReturnType<typeof sharedDevnet>>, wallet: WalletView) =>
        fundSolana(devnet, wallet.solana.address, { usdc: 1_000_000n }),
    },
  ] as const;

  for (const c of chains) {
    it(`${c.chain}: leaves the scan where it was, rather than reading the chain again from its start`, async () => {
      const devnet = await sharedDevnet();
      const gate = await RpcGate.start(c.target(devnet));
      const gated = await createTestServer({ env: await c.env(gate) });
      try {
        const { apiKey } = await seedAccount(gated.api);
        const wallet = await createWallet(gated.api, apiKey);
        await c.fund(devnet, wallet);
        await historyOf(gated.api, apiKey, wallet.id, 1);
        const scannedTo = async () => {
          const [row] = await selectRows<{ cursor: string }>(
            gated.service.store.db,
            sql`SELECT cursor FROM chain_cursors WHERE chain = ${c.chain}`,
          );
          return BigInt(row?.cursor.split(":")[0] ?? "-1");
        };
        const before = await scannedTo();
        // The node answers a head 5 below the cursor for a while: every scan pass meanwhile sees it.
        gate.decide = ({ methods, body }) =>
          methods.length === 1 && methods[0] === c.headMethod
            ? {
                gatewayAnswers: {
                  status: 200,
                  body: JSON.stringify({
                    jsonrpc: "2.0",
                    id: (JSON.parse(body) as { id: unknown }).id,
                    result: c.lowHead(before - 5n),
                  }),
                },
              }
            : "forward";
        const seen: bigint[] = [];
        const until = Date.now() + 1500;
        while (Date.now() < until) {
          seen.push(await scannedTo());
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
        gate.openUp();
        gate.held.splice(0);
        // Before, the cursor went back to the chain's start, and the chain was read again from there.
        expect(seen.every((cursor) => cursor >= before)).toBe(true);
        // And the scan goes on: a transfer after it is recorded.
        await c.fund(devnet, wallet);
        await historyOf(gated.api, apiKey, wallet.id, 2);
      } finally {
        await gated.close();
        await gate.close();
      }
    });
  }
});
