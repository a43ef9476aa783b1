import { fundEvm, fundSolana } from "@svc/devnet";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { evmKey, solanaKey } from "./support/chains.ts";
import { eventually } from "./support/eventually.ts";
import { RpcGate } from "./support/rpc-gate.ts";
import { startRpcProxy } from "./support/rpc-proxy.ts";
import {
  createTestServer,
  evmThroughGate,
  seedAccount,
  sharedDevnet,
  solanaThroughGate,
  type TestServer,
} from "./support/test-server.ts";

/**
 * The confirmer against chain nodes that stall or lag. It settles each chain in a loop of its own: a pass over
 * a chain whose node stalls (one read can wait its time limit, 15 s, and more with retries) holds up no other
 * chain's confirmations; there the service reaches the Solana runtime through an RpcGate, the EVM node
 * directly. And it does not fail a send on the word of a node behind another.
 */

let server: TestServer;
let gate: RpcGate;

beforeAll(async () => {
  const devnet = await sharedDevnet();
  gate = await RpcGate.start(devnet.solana.rpcUrl);
  server = await createTestServer({
    env: {
      ...(await solanaThroughGate(gate)),
      SVC_CONFIRMER_INTERVAL_MS: "200",
    },
  });
});
afterAll(async () => {
  await gate?.close();
  await server?.close();
});

describe("a chain whose node stalls the confirmer's reads", () => {
  it("holds up no other chain's confirmations", async () => {
    const devnet = await sharedDevnet();
    const { apiKey } = await seedAccount(server.api);
    const wallet = (
      await server.api.post("/v1/wallets", { name: "both", chains: ["base", "solana"] }, apiKey)
    ).body;
    await fundEvm(devnet, wallet.evm.address, { eth: 10n ** 17n, usdc: 5_000_000n });
    await fundSolana(devnet, wallet.solana.address, { sol: 10n ** 9n, usdc: 5_000_000n });
    const status = async (id: string) =>
      (await server.api.get(`/v1/transactions/${id}`, apiKey)).body.status as string;

    // The Solana node takes the send, then holds every status read of the confirmer.
    gate.decide = (call) => (call.methods.includes("getSignatureStatuses") ? "hold" : "forward");
    const onSolana = await server.api.post(
      `/v1/wallets/${wallet.id}/send`,
      { to: (await solanaKey()).address, amount: "1", chain: "solana" },
      apiKey,
    );
    expect(onSolana.status, onSolana.text).toBe(201);
    const stalled = await eventually(() => gate.held[0], {
      describe: "the confirmer's Solana pass to wait on its status read",
    });

    const onEvm = await server.api.post(
      `/v1/wallets/${wallet.id}/send`,
      { to: evmKey().address, amount: "1", chain: "base" },
      apiKey,
    );
    expect(onEvm.status, onEvm.text).toBe(201);
    await eventually(async () => (await status(onEvm.body.id)) === "confirmed", {
      describe: "the EVM send to be confirmed",
    });
    // Confirmed while the Solana pass still waits on the node: its read has been neither answered nor given up.
    expect(stalled.abandoned).toBe(false);
    expect(await status(onSolana.body.id)).toBe("pending");

    // Once the node answers, the Solana send is confirmed too.
    gate.openUp();
    await eventually(async () => (await status(onSolana.body.id)) === "confirmed", {
      describe: "the Solana send to be confirmed",
    });
  });
});

describe("an EVM node behind a load balancer's other node", () => {
  /**
   * A service whose EVM node is reached through a balancer, and a send of 1 USDC it made, mined. A FAKE of
   * what the machine cannot reach: while `behind.now`, receipts are answered by a node that has not seen the
   * send's block (null), and every other call by one that has (the devnet).
   */
  async function minedSendBehindBalancer() {
    const devnet = await sharedDevnet();
    const behind = { now: false };
    const balancer = await startRpcProxy(devnet.evm.rpcUrl, (method, _nth, body) => {
      if (!behind.now || method !== "eth_getTransactionReceipt") return "forward";
      const { id } = JSON.parse(body) as { id: number };
      return { status: 200, body: JSON.stringify({ jsonrpc: "2.0", id, result: null }) };
    });
    const lagging = await createTestServer({
      env: { ...(await evmThroughGate(balancer)), SVC_CONFIRMER_INTERVAL_MS: "3600000" },
    });
    onTestFinished(async () => {
      await lagging.close();
      await balancer.close();
    });
    const { apiKey } = await seedAccount(lagging.api);
    const wallet = (await lagging.api.post("/v1/wallets", { name: "payer", chains: ["base"] }, apiKey)).body;
    await fundEvm(devnet, wallet.evm.address, { eth: 10n ** 17n, usdc: 5_000_000n });
    const sent = await lagging.api.post(
      `/v1/wallets/${wallet.id}/send`,
      { to: evmKey().address, amount: "1", chain: "base" },
      apiKey,
    );
    expect(sent.status, sent.text).toBe(201);
    const status = async () =>
      (await lagging.api.get(`/v1/transactions/${sent.body.id}`, apiKey)).body.status;
    return { lagging, behind, status };
  }

  it("that has not seen a mined send yet does not get it failed: confirmed once the node has caught up", async () => {
    const { lagging, behind, status } = await minedSendBehindBalancer();
    // However long ago it was made (a held spend approved hours later, a send mined only after a while).
    lagging.clock.advance(120_000);
    // Mined (the nonce moved past it), yet no receipt where the confirmer asks: it was failed, its amount
    // given back to the daily limit while the money had moved.
    behind.now = true;
    await lagging.service.confirmer.runOnce();
    expect(await status()).toBe("pending");
    behind.now = false;
    await lagging.service.confirmer.runOnce();
    expect(await status()).toBe("confirmed");
  });

  it("a send still missing where its nonce is used a minute after it was first found so (longer than a node lags) is failed", async () => {
    const { lagging, behind, status } = await minedSendBehindBalancer();
    behind.now = true;
    await lagging.service.confirmer.runOnce();
    expect(await status()).toBe("pending");
    lagging.clock.advance(61_000);
    await lagging.service.confirmer.runOnce();
    expect(await status()).toBe("failed");
  });
});
