import { fundEvm } from "@svc/devnet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ChainClient, TokenInfo } from "../src/chains/types.ts";
import { devnetClients, evmKey } from "./support/chains.ts";
import { eventually } from "./support/eventually.ts";
import { RpcGate } from "./support/rpc-gate.ts";
import { waitForSettled } from "./support/spends.ts";
import {
  createTestServer,
  evmThroughGate,
  expectErrorShape,
  seedAccount,
  sharedDevnet,
  type TestServer,
} from "./support/test-server.ts";

/**
 * Archiving a wallet while one of its sends is in flight: the send either completes and is recorded, or is
 * refused and moves nothing; never money moved without a record. The service reaches its EVM chain through an
 * RpcGate, so the test decides where the send is when the archive lands.
 */

let server: TestServer;
let gate: RpcGate;
let base: ChainClient;
let usdc: TokenInfo;
let apiKey: string;
const USDC = 1_000_000n;

beforeAll(async () => {
  const devnet = await sharedDevnet();
  gate = await RpcGate.start(devnet.evm.rpcUrl);
  server = await createTestServer({ env: await evmThroughGate(gate) });
  ({ base } = await devnetClients(devnet));
  usdc = base.config.tokens[0] as TokenInfo;
  ({ apiKey } = await seedAccount(server.api));
});
afterAll(async () => {
  await server.close();
  await gate.close();
});

async function fundedWallet(): Promise<{ id: string; address: `0x${string}` }> {
  const wallet = await server.api.post(
    "/v1/wallets",
    { name: "archived mid-send", chains: ["base"] },
    apiKey,
  );
  if (wallet.status !== 201) throw new Error(wallet.text);
  await fundEvm(await sharedDevnet(), wallet.body.evm.address, { eth: 10n ** 17n, usdc: 10n * USDC });
  return { id: wallet.body.id, address: wallet.body.evm.address };
}

const sendsOf = async (walletId: string) =>
  (await server.api.get(`/v1/wallets/${walletId}/transactions?type=send`, apiKey)).body.data as {
    id: string;
    status: string;
  }[];

const archive = async (walletId: string) => {
  const response = await server.api.delete(`/v1/wallets/${walletId}`, apiKey);
  expect(response.status).toBe(204);
};

describe("archiving a wallet while a send is in flight", () => {
  it("refuses the send, moving and recording nothing, when the archive lands before the spend is admitted", async () => {
    const wallet = await fundedWallet();
    const recipient = evmKey().address;
    // The send stops at its first chain read (balances, fee estimate), before anything is signed.
    gate.decide = ({ methods }) =>
      methods.some((m) => ["eth_getBalance", "eth_call", "eth_estimateGas"].includes(m)) ? "hold" : "forward";
    const sending = server.api.post(
      `/v1/wallets/${wallet.id}/send`,
      { to: recipient, amount: "1", chain: "base" },
      apiKey,
    );
    await eventually(() => gate.held.length > 0, { describe: "the send to reach the chain" });
    await archive(wallet.id);
    gate.openUp();
    const response = await sending;
    expect(response.status, response.text).toBe(409);
    expect(expectErrorShape(response).reason).toBe("wallet_archived");
    expect(await sendsOf(wallet.id)).toEqual([]);
    expect(await base.getBalance(recipient, usdc)).toBe(0n);
    expect(await base.getMinedNonce?.(wallet.address)).toBe(0);
  });

  it("completes and records the send when the archive lands while it is being broadcast", async () => {
    const wallet = await fundedWallet();
    const recipient = evmKey().address;
    // The spend is admitted and recorded; its broadcast is held on the way to the node.
    gate.decide = ({ methods }) => (methods.includes("eth_sendRawTransaction") ? "hold" : "forward");
    const sending = server.api.post(
      `/v1/wallets/${wallet.id}/send`,
      { to: recipient, amount: "1", chain: "base" },
      apiKey,
    );
    await eventually(() => gate.held.length > 0, { describe: "the broadcast to be on its way" });
    // Recorded before it is broadcast: whatever happens next, the money has its record.
    expect((await sendsOf(wallet.id)).map((t) => t.status)).toEqual(["pending"]);
    await archive(wallet.id);
    gate.openUp();
    const response = await sending;
    expect(response.status, response.text).toBe(201);
    const settled = await waitForSettled(server.api, apiKey, response.body.id);
    expect(settled.status).toBe("confirmed");
    expect(await base.getBalance(recipient, usdc)).toBe(USDC);
    expect((await server.api.get(`/v1/wallets/${wallet.id}`, apiKey)).body.status).toBe("archived");
    // And the archived wallet sends nothing more.
    const after = await server.api.post(
      `/v1/wallets/${wallet.id}/send`,
      { to: recipient, amount: "1", chain: "base" },
      apiKey,
    );
    expect(expectErrorShape(after).reason).toBe("wallet_archived");
  });

  it("racing freely, each send is either recorded and paid, or refused with nothing moved", async () => {
    gate.openUp();
    for (let round = 0; round < 4; round++) {
      const wallet = await fundedWallet();
      const recipient = evmKey().address;
      const [response] = await Promise.all([
        server.api.post(
          `/v1/wallets/${wallet.id}/send`,
          { to: recipient, amount: "1", chain: "base" },
          apiKey,
        ),
        archive(wallet.id),
      ]);
      const recorded = await sendsOf(wallet.id);
      if (response.status === 201) {
        expect(recorded.map((t) => t.id)).toEqual([response.body.id]);
        expect((await waitForSettled(server.api, apiKey, response.body.id)).status).toBe("confirmed");
        expect(await base.getBalance(recipient, usdc)).toBe(USDC);
      } else {
        expect(response.status, response.text).toBe(409);
        expect(recorded).toEqual([]);
        expect(await base.getBalance(recipient, usdc)).toBe(0n);
      }
    }
  });
});
