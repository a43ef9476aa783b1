/**
 * PostgreSQL's connection lost in the middle of a spend's transaction (a database restart or failover, a
 * pooler restarting, a network reset): the service, run as `npm start` runs it, keeps serving, and the
 * request that lost its answer is answered by its retry from what the store holds, not with an error that
 * hides a payment.
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fundEvm } from "@svc/devnet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ChainClient } from "../src/chains/types.ts";
import { devnetClients, evmKey } from "./support/chains.ts";
import { eventually } from "./support/eventually.ts";
import { startServiceProcess } from "./support/service-process.ts";
import { createFreshDatabase, STORE_KIND, seedAccount, sharedDevnet } from "./support/test-server.ts";

const USDC = 1_000_000n;
/** A frontend message of PostgreSQL's wire protocol: a simple query ('Q'). */
const SIMPLE_QUERY = 0x51;

/**
 * A TCP relay in front of PostgreSQL that, once armed, passes on the COMMIT of the next transaction that
 * locked a wallet's spending policy (the statement an admission names), then cuts that connection without
 * its answer: the COMMIT happens, the service never hears of it.
 */
async function startCommitCutter(upstream: { host: string; port: number }) {
  let armed = false;
  let cuts = 0;
  const server = net.createServer((client) => {
    const database = net.connect(upstream.port, upstream.host);
    let lockedPolicy = false;
    let cut = false;
    client.on("data", (chunk: Buffer) => {
      const text = chunk.toString("latin1").toLowerCase();
      if (text.includes("lock_spending_policy_with_nonce")) lockedPolicy = true;
      const commits = chunk[0] === SIMPLE_QUERY && text.includes("commit");
      if (armed && lockedPolicy && commits) {
        armed = false;
        cut = true;
        cuts++;
        database.write(chunk);
        // Long enough for the COMMIT to be done; its answer is dropped meanwhile.
        setTimeout(() => {
          client.destroy();
          database.destroy();
        }, 200);
        return;
      }
      if (commits) lockedPolicy = false;
      database.write(chunk);
    });
    database.on("data", (chunk: Buffer) => {
      if (!cut) client.write(chunk);
    });
    for (const [side, other] of [
      [client, database],
      [database, client],
    ] as const) {
      side.on("error", () => other.destroy());
      side.on("close", () => other.destroy());
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    arm: () => {
      armed = true;
    },
    cuts: () => cuts,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe.runIf(STORE_KIND === "postgres")("PostgreSQL's connection lost as a spend commits", () => {
  let database: Awaited<ReturnType<typeof createFreshDatabase>>;
  let cutter: Awaited<ReturnType<typeof startCommitCutter>>;
  let dataDir: string;
  let base: ChainClient;

  beforeAll(async () => {
    database = await createFreshDatabase();
    const url = new URL(database.url);
    cutter = await startCommitCutter({ host: url.hostname, port: Number(url.port || 5432) });
    dataDir = mkdtempSync(join(tmpdir(), "svc-db-loss-"));
    ({ base } = await devnetClients(await sharedDevnet()));
  });
  afterAll(async () => {
    await cutter?.close();
    await database?.drop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it("the process keeps serving, and a retry with the key answers the spend that committed, which moved the money once", {
    timeout: 300_000,
  }, async () => {
    const devnet = await sharedDevnet();
    const throughCutter = new URL(database.url);
    throughCutter.hostname = "127.0.0.1";
    throughCutter.port = String(cutter.port);
    const service = await startServiceProcess({
      env: {
        DATABASE_URL: throughCutter.toString(),
        SVC_DATA_DIR: dataDir,
        SVC_MASTER_KEY: randomBytes(32).toString("base64"),
        SVC_JWT_SECRET: randomBytes(32).toString("hex"),
        LOG_LEVEL: "warn",
        SVC_RPC_BASE: devnet.evm.rpcUrl,
        SVC_USDC_BASE: devnet.evm.usdc,
        SVC_RPC_SOLANA: devnet.solana.rpcUrl,
        SVC_USDC_SOLANA: devnet.solana.usdcMint,
        SVC_CONFIRMER_INTERVAL_MS: "200",
      },
    });
    let exitCode: number | null | undefined;
    void service.exited.then((code) => {
      exitCode = code;
    });
    try {
      const { apiKey } = await seedAccount(service.api);
      const wallet = (await service.api.post("/v1/wallets", { name: "cut", chains: ["base"] }, apiKey)).body;
      await fundEvm(devnet, wallet.evm.address, { eth: 10n ** 17n, usdc: 100n * USDC });
      const to = evmKey().address;
      const send = { to, amount: "7", chain: "base", token: "USDC" };
      const path = `/v1/wallets/${wallet.id}/send`;
      const headers = { "idempotency-key": "lost-commit" };

      cutter.arm();
      const first = await service.api.post(path, send, apiKey, headers).catch((error: unknown) => error);
      expect(cutter.cuts()).toBe(1);

      // The process lives: it answers, and a request of another kind works.
      expect((await service.api.get(`/v1/wallets/${wallet.id}`, apiKey)).status).toBe(200);
      expect(exitCode, "the service process ended").toBeUndefined();

      // The retry answers the spend that committed; the money moves once and the record says so.
      const retry = await service.api.post(path, send, apiKey, headers);
      expect(retry.status, `${JSON.stringify(first)}\n${retry.text}`).toBe(201);
      expect(retry.body).toMatchObject({ type: "send", amount: "7", to });
      const settled = await eventually(
        async () => {
          const tx = (await service.api.get(`/v1/transactions/${retry.body.id}`, apiKey)).body;
          return tx.status !== "pending" && tx;
        },
        { describe: "the spend to settle" },
      );
      expect(settled.status).toBe("confirmed");
      const [token] = base.config.tokens;
      expect(await base.getBalance(to, token as NonNullable<typeof token>)).toBe(7n * USDC);
      const sends = (await service.api.get(`/v1/wallets/${wallet.id}/transactions?type=send`, apiKey)).body
        .data;
      expect(sends.map((tx: { id: string }) => tx.id)).toEqual([retry.body.id]);
      expect(exitCode).toBeUndefined();
    } finally {
      await service.stop("SIGKILL");
    }
  });
});
