/**
 * `npm start` twice on one data directory: the local chains start fresh each time, the store's history
 * stays. A wallet that sent on the chains before is not held back by what the store recorded of them.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { eventually } from "./support/eventually.ts";
import { unpackInitializedPglite } from "./support/pglite-setup.ts";
import { startServiceProcess } from "./support/service-process.ts";
import { STORE_KIND, seedAccount } from "./support/test-server.ts";

const dataDir = mkdtempSync(join(tmpdir(), "svc-devnet-restart-"));
// The store PGlite has initialized (initdb is not what is tested), in the data directory's place for it.
unpackInitializedPglite(join(dataDir, "svc", "pg"));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

/** The service as `npm start` runs it: PGlite in the data directory, local chains of its own. */
const start = () =>
  startServiceProcess({
    env: {
      DATABASE_URL: "",
      SVC_DATA_DIR: join(dataDir, "svc"),
      LOG_LEVEL: "warn",
      SVC_CONFIRMER_INTERVAL_MS: "200",
    },
  });

// The service runs on PGlite whatever store the suite is on: once, in the embedded run.
describe.skipIf(STORE_KIND === "postgres")("the service restarted with fresh local chains", () => {
  it("lets a wallet that sent before send again, in USDC and in ETH, each confirmed", async () => {
    let service = await start();
    let owner: Awaited<ReturnType<typeof seedAccount>>;
    let walletId: string;
    const to = "0x1111111111111111111111111111111111111111";
    const sendAndConfirm = async (token: string, amount: string) => {
      const sent = await service.api.post(
        `/v1/wallets/${walletId}/send`,
        { to, amount, token, chain: "base" },
        owner.apiKey,
      );
      expect(sent.status, sent.text).toBe(201);
      return eventually(
        async () => {
          const tx = (await service.api.get(`/v1/transactions/${sent.body.id}`, owner.apiKey)).body;
          return tx.status !== "pending" && tx;
        },
        { intervalMs: 250 },
      );
    };
    const fund = async (usdc: string) => {
      for (const [token, amount] of [
        ["ETH", "0.1"],
        ["USDC", usdc],
      ])
        expect(
          (
            await service.api.post(
              `/v1/wallets/${walletId}/faucet`,
              { chain: "base", token, amount },
              owner.apiKey,
            )
          ).status,
        ).toBe(201);
    };
    try {
      owner = await seedAccount(service.api);
      walletId = (await service.api.post("/v1/wallets", { name: "w", chains: ["base"] }, owner.apiKey)).body
        .id;
      await fund("20");
      expect((await sendAndConfirm("USDC", "10")).status).toBe("confirmed");
      expect((await sendAndConfirm("USDC", "5")).status).toBe("confirmed");
    } finally {
      await service.stop("SIGINT");
    }
    service = await start();
    try {
      await fund("10");
      // An x402 payment counts none of the sends the store recorded on the previous chains (15 USDC, more than
      // the wallet now holds): their nonces were forgotten with those chains.
      const [demo] = (await service.api.get("/v1/x402/services?category=demo", owner.apiKey)).body.data;
      const paid = await service.api.post("/v1/x402/fetch", { walletId, url: demo.resource }, owner.apiKey);
      expect(paid.status, paid.text).toBe(200);
      // Before, the first was refused ('balance 20, of which 15 is taken by 2 sends not yet on chain'),
      // and an ETH send was signed with nonce 2 on a chain at 0, and waited for good.
      expect((await sendAndConfirm("USDC", "1")).status).toBe("confirmed");
      expect((await sendAndConfirm("ETH", "0.001")).status).toBe("confirmed");
    } finally {
      await service.stop("SIGINT");
    }
  });
});
