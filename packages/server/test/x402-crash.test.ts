/**
 * A paid fetch cut short by a crash: the service process is killed (SIGKILL) after it recorded and signed
 * the x402 payment and the facilitator settled it, before the resource's answer came back. Restarted on the
 * same store, the service completes the transaction from the chain, and a retry with the same
 * Idempotency-Key answers from that transaction instead of paying again.
 *
 * Chains as in x402-fetch.test.ts: the testnet profile pointed at a devnet whose anvil has Base Sepolia's
 * chain id, so that the reference packages (`@x402/svm` knows only the public Solana ids) pay and settle.
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Address, createKeyPairSignerFromPrivateKeyBytes } from "@solana/kit";
import { type Devnet, fundEvm, fundSolana, startDevnet } from "@svc/devnet";
import {
  createUsdcAccount,
  type FacilitatorSettlement,
  type LocalFacilitator,
  type ResourceServer,
  SOLANA_DEVNET_NETWORK,
  startLocalFacilitator,
  startResourceServerV2,
} from "@svc/x402-local";
import { privateKeyToAddress } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createChainClient, resolveChains } from "../src/chains/registry.ts";
import type { ChainConfig } from "../src/chains/types.ts";
import type { StoreLocation } from "../src/internal/db/store.ts";
import { testnetProfileOnLocalChains } from "./support/chains.ts";
import { unpackInitializedPglite } from "./support/pglite-setup.ts";
import { startServiceProcess } from "./support/service-process.ts";
import { waitForHistory } from "./support/spends.ts";
import {
  createFreshDatabase,
  createTestServer,
  expectErrorShape,
  STORE_KIND,
  seedAccount,
  TEST_JWT_SECRET,
  TEST_MASTER_KEY,
} from "./support/test-server.ts";

const PRICE = 10_000n; // 0.01 USDC
/** The age at which an Idempotency-Key claim left in progress is taken over (idempotency.ts). */
const STALE_CLAIM_MS = 60_000;

let devnet: Devnet;
let facilitator: LocalFacilitator;
let resource: ResourceServer;
let chains: { evm: ChainConfig; solana: ChainConfig };
/** Set by a test: what the facilitator does after settling, before it answers. */
let afterSettle: ((settlement: FacilitatorSettlement) => Promise<void>) | undefined;

function testnetEnv(): Record<string, string> {
  return { ...testnetProfileOnLocalChains(devnet), SVC_OUTBOUND_ALLOW: "127.0.0.0/8" };
}

beforeAll(async () => {
  devnet = await startDevnet({ evmChainId: 84532 });
  facilitator = await startLocalFacilitator(devnet, {
    onSettled: async (settlement) => {
      const hook = afterSettle;
      afterSettle = undefined;
      await hook?.(settlement);
    },
  });
  const solanaPayTo = (await createKeyPairSignerFromPrivateKeyBytes(randomBytes(32))).address;
  await createUsdcAccount(devnet, solanaPayTo);
  const weather = { city: "Lisbon", forecast: "sunny" };
  resource = await startResourceServerV2(facilitator.url, [
    {
      path: "/weather/evm",
      accepts: [
        {
          network: "eip155:84532",
          payTo: privateKeyToAddress(`0x${randomBytes(32).toString("hex")}`),
          amount: String(PRICE),
          asset: devnet.evm.usdc,
          extra: devnet.evm.usdcEip712,
        },
      ],
      body: weather,
    },
    {
      path: "/weather/solana",
      accepts: [
        {
          network: SOLANA_DEVNET_NETWORK,
          payTo: solanaPayTo,
          amount: String(PRICE),
          asset: devnet.solana.usdcMint,
        },
      ],
      body: weather,
    },
  ]);
  const resolved = await resolveChains(
    (await import("../src/internal/config.ts")).loadConfig(testnetEnv()).network,
  );
  chains = {
    evm: resolved.find((c) => c.name === "base-sepolia") as ChainConfig,
    solana: resolved.find((c) => c.name === "solana-devnet") as ChainConfig,
  };
});

afterAll(async () => {
  await resource?.stop();
  await facilitator?.stop();
  await devnet?.stop();
});

/**
 * A fresh store for one crash: a PGlite directory (initdb already run: the crash is what is tested, not a
 * first start), or a PostgreSQL database when DATABASE_URL is set.
 */
async function freshStore(): Promise<{
  env: Record<string, string>;
  location: StoreLocation;
  drop(): Promise<void>;
}> {
  const dir = mkdtempSync(join(tmpdir(), "svc-x402-crash-"));
  if (STORE_KIND === "postgres") {
    const db = await createFreshDatabase();
    return {
      env: { DATABASE_URL: db.url, SVC_DATA_DIR: dir },
      location: { databaseUrl: db.url },
      drop: async () => {
        await db.drop();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  }
  const pgliteDir = join(dir, "pg");
  unpackInitializedPglite(pgliteDir);
  return {
    env: { SVC_DATA_DIR: dir },
    location: { pgliteDir },
    drop: async () => rmSync(dir, { recursive: true, force: true }),
  };
}

async function usdcBalance(chain: ChainConfig, owner: string): Promise<bigint> {
  const client = createChainClient(chain);
  try {
    return await client.getBalance(owner, chain.tokens[0] as ChainConfig["tokens"][number]);
  } finally {
    await client.close?.();
  }
}

describe("a crash during a paid fetch", () => {
  // Two service start-ups on 2 loaded cores: the limit only bounds a broken run.
  it.each(["evm", "solana"] as const)(
    "%s: after a restart the transaction completes from the chain, and the retry with the same Idempotency-Key pays nothing",
    { timeout: 300_000 },
    async (kind) => {
      const store = await freshStore();
      try {
        const first = await startServiceProcess({
          env: {
            ...store.env,
            ...testnetEnv(),
            SVC_MASTER_KEY: TEST_MASTER_KEY,
            SVC_JWT_SECRET: TEST_JWT_SECRET,
            LOG_LEVEL: "warn",
          },
        });
        const { apiKey } = await seedAccount(first.api);
        const created = await first.api.post(
          "/v1/wallets",
          { name: "crash", chains: ["base-sepolia", "solana-devnet"] },
          apiKey,
        );
        expect(created.status, created.text).toBe(201);
        const wallet = created.body;
        await fundEvm(devnet, wallet.evm.address, { usdc: 1_000_000n });
        await fundSolana(devnet, wallet.solana.address as Address, { usdc: 1_000_000n });
        const chain = chains[kind];
        const payer = kind === "evm" ? wallet.evm.address : wallet.solana.address;
        const before = await usdcBalance(chain, payer);
        const settledBefore = facilitator.settlements.length;

        // The facilitator has settled the payment the service recorded and signed: the service dies now,
        // before the resource's answer reaches it.
        afterSettle = async () => {
          first.child.kill("SIGKILL");
          await first.exited;
        };
        const headers = { "idempotency-key": `crash-${randomBytes(6).toString("hex")}` };
        const body = { walletId: wallet.id, url: `${resource.url}/weather/${kind}` };
        const cut = await first.api.post("/v1/x402/fetch", body, apiKey, headers).then(
          (response) => `answered ${response.status}`,
          () => "cut",
        );
        expect(cut).toBe("cut");
        const settlement = facilitator.settlements.slice(settledBefore);
        expect(settlement).toEqual([expect.objectContaining({ success: true })]);
        expect(await usdcBalance(chain, payer)).toBe(before - PRICE);

        const restarted = await createTestServer({
          devnet,
          store: store.location,
          env: testnetEnv(),
        });
        try {
          // The confirmer finds the settlement on chain: the payment is confirmed with its transaction.
          const payments = (rows: { type: string; id: string }[]) =>
            rows.filter((row) => row.type === "x402");
          const [payment] = payments(
            await waitForHistory(restarted.api, apiKey, wallet.id, (rows) =>
              rows.some((row) => row.type === "x402" && row.status !== "pending"),
            ),
          );
          expect(payment).toMatchObject({
            type: "x402",
            status: "confirmed",
            chain: chain.name,
            txHash: settlement[0]?.transaction,
            resource: body.url,
            amount: "0.01",
          });

          // The claim the dead process left is taken over once stale, and answered from its payment.
          restarted.clock.advance(STALE_CLAIM_MS + 1000);
          const retry = await restarted.api.post("/v1/x402/fetch", body, apiKey, headers);
          expect(retry.status, retry.text).toBe(502);
          expect(expectErrorShape(retry)).toMatchObject({
            reason: "payment_outcome_unknown",
            details: { transactionId: payment?.id },
          });
          const again = await restarted.api.post("/v1/x402/fetch", body, apiKey, headers);
          expect(again.status).toBe(502);
          expect(again.headers.get("idempotent-replayed")).toBe("true");
          expect(facilitator.settlements.length - settledBefore).toBe(1);
          expect(await usdcBalance(chain, payer)).toBe(before - PRICE);
          const history = await restarted.api.get(`/v1/wallets/${wallet.id}/transactions?limit=100`, apiKey);
          expect(payments(history.body.data)).toHaveLength(1);
        } finally {
          await restarted.close();
        }
      } finally {
        afterSettle = undefined;
        await store.drop();
      }
    },
  );
});
