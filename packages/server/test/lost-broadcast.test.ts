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
 * A send is recorded as broadcast by the write that records it, and its broadcast follows. When that
 * broadcast never reaches the node, the confirmer sends the recorded transaction again once a short wait
 * has passed since, and it lands once.
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

/**
 * The gate's verdicts for a gateway whose node was slow to take the first broadcast: it answers `status`
 * (a 504, or a 200 as JSON-RPC gateways commonly do), with a JSON-RPC error body of its own, and the
 * broadcast is held (it reaches the node when let go); the rest pass.
 */
function firstBroadcastTimedOutAtGateway(status: number): RpcGate["decide"] {
  let broadcasts = 0;
  return ({ methods, body }) => {
    if (!methods.includes("eth_sendRawTransaction") || ++broadcasts > 1) return "forward";
    const { id } = JSON.parse(body) as { id: number };
    const error = { code: -32603, message: "upstream request timed out" };
    return { gatewayAnswers: { status, body: JSON.stringify({ jsonrpc: "2.0", id, error }) } };
  };
}

describe("a broadcast lost on the way to the node", () => {
  it("is answered pending, sent again by the confirmer, and lands once", async () => {
    const wallet = await server.api.post("/v1/wallets", { name: "lost broadcast", chains: ["base"] }, apiKey);
    expect(wallet.status, wallet.text).toBe(201);
    await fundEvm(await sharedDevnet(), wallet.body.evm.address, { eth: 10n ** 17n, usdc: 10n * USDC });
    const recipient = evmKey().address;
    const broadcasts: number[] = [];
    gate.decide = ({ methods }) => {
      if (!methods.includes("eth_sendRawTransaction")) return "forward";
      broadcasts.push(Date.now());
      // The first is cut before the node sees it; the confirmer's are let through.
      return broadcasts.length === 1 ? "drop" : "forward";
    };
    const response = await server.api.post(
      `/v1/wallets/${wallet.body.id}/send`,
      { to: recipient, amount: "1", chain: "base" },
      apiKey,
    );
    expect(response.status, response.text).toBe(201);
    expect(response.body.status).toBe("pending");
    expect(await base.getMinedNonce?.(wallet.body.evm.address)).toBe(0);

    const settled = await waitForSettled(server.api, apiKey, response.body.id);
    expect(settled.status).toBe("confirmed");
    expect(settled.txHash).toBe(response.body.txHash);
    const [first, second] = broadcasts;
    expect(second, "sent again").toBeDefined();
    // Recorded as broadcast when it was recorded: the confirmer (a pass every 100 ms here) waits its 3 s
    // from then before sending again, rather than re-sending at its next pass.
    expect((second ?? 0) - (first ?? 0)).toBeGreaterThan(1_000);
    expect(await base.getBalance(recipient, usdc)).toBe(USDC);
    expect(await base.getMinedNonce?.(wallet.body.evm.address)).toBe(1);
  });
});

describe("a pending spend whose re-broadcasts get no clear answer", () => {
  it("stays pending, is logged as a warning naming the spend at the 1st, 2nd and 4th unclear re-broadcast in a row, and lands once one is clear", async () => {
    const wallet = await server.api.post(
      "/v1/wallets",
      { name: "unclear resends", chains: ["base"] },
      apiKey,
    );
    expect(wallet.status, wallet.text).toBe(201);
    await fundEvm(await sharedDevnet(), wallet.body.evm.address, { eth: 10n ** 17n, usdc: 10n * USDC });
    let broadcasts = 0;
    gate.decide = ({ methods, body }) => {
      if (!methods.includes("eth_sendRawTransaction")) return "forward";
      broadcasts += 1;
      // The request's own broadcast is cut; the confirmer's first five meet a gateway's error of its own.
      if (broadcasts === 1) return "drop";
      if (broadcasts > 6) return "forward";
      const { id } = JSON.parse(body) as { id: number };
      const error = { code: -32603, message: "upstream request timed out" };
      return { gatewayAnswers: { status: 200, body: JSON.stringify({ jsonrpc: "2.0", id, error }) } };
    };
    try {
      const response = await server.api.post(
        `/v1/wallets/${wallet.body.id}/send`,
        { to: evmKey().address, amount: "1", chain: "base" },
        apiKey,
      );
      expect(response.status, response.text).toBe(201);
      // The 3 s the confirmer waits between re-broadcasts (the test above waits them in real time) pass at
      // once on the service's clock: each pass from now re-broadcasts, until one is clear and lands.
      server.clock.advance(3_000);
      const settled = await waitForSettled(server.api, apiKey, response.body.id);
      expect(settled.status).toBe("confirmed");
      const warnings = server.logs.lines
        .map(
          (line) =>
            JSON.parse(line) as {
              level: number;
              msg: string;
              transactionId?: string;
              unclearResends?: number;
            },
        )
        .filter((entry) => entry.level === 40 && entry.transactionId === response.body.id);
      expect(warnings.map((entry) => entry.msg)).toEqual(
        Array(3).fill("pending spend re-broadcast without a clear answer; still pending"),
      );
      // Every 3 s for as long as the gateway answers so would fill the log: the 1st, 2nd, 4th, 8th… say it.
      expect(warnings.map((entry) => entry.unclearResends)).toEqual([1, 2, 4]);
      expect(broadcasts).toBe(7);
    } finally {
      server.clock.reset();
      gate.openUp();
    }
  });
});

describe("a broadcast a gateway answers with an error of its own while the node takes it", () => {
  // The 200 was recorded failed, its room in the daily limit given back, while the transfer landed.
  it.each([504, 200])(
    "answered HTTP %i: is answered pending, not recorded failed, and lands with its amount kept in the daily limit",
    async (status) => {
      const wallet = await server.api.post(
        "/v1/wallets",
        { name: "gateway timeout", chains: ["base"], policy: { dailyLimit: "100" } },
        apiKey,
      );
      expect(wallet.status, wallet.text).toBe(201);
      await fundEvm(await sharedDevnet(), wallet.body.evm.address, { eth: 10n ** 17n, usdc: 10n * USDC });
      const recipient = evmKey().address;
      gate.decide = firstBroadcastTimedOutAtGateway(status);
      try {
        const response = await server.api.post(
          `/v1/wallets/${wallet.body.id}/send`,
          { to: recipient, amount: "5", chain: "base" },
          apiKey,
        );
        expect(response.status, response.text).toBe(201);
        expect(response.body.status).toBe("pending");
        // Only now does the transaction reach the node, after everything the service asked about it.
        gate.openUp();
        const settled = await waitForSettled(server.api, apiKey, response.body.id);
        expect(settled.status).toBe("confirmed");
        expect(await base.getBalance(recipient, usdc)).toBe(5n * USDC);
        const spending = await server.api.get(`/v1/wallets/${wallet.body.id}/spending`, apiKey);
        expect(spending.body.used).toBe("5.00");
      } finally {
        gate.openUp();
      }
    },
  );
});

describe("a broadcast the node refuses once a later nonce was handed out", () => {
  it("is answered broadcast_rejected and recorded failed even when its nonce gap cannot be filled at once; the confirmer fills it", async () => {
    const wallet = await server.api.post("/v1/wallets", { name: "refused", chains: ["base"] }, apiKey);
    expect(wallet.status, wallet.text).toBe(201);
    await fundEvm(await sharedDevnet(), wallet.body.evm.address, { eth: 10n ** 17n, usdc: 10n * USDC });
    const send = (amount: string) =>
      server.api.post(
        `/v1/wallets/${wallet.body.id}/send`,
        { to: evmKey().address, amount, chain: "base" },
        apiKey,
      );
    let broadcasts = 0;
    gate.decide = ({ methods }) =>
      methods.includes("eth_sendRawTransaction") && ++broadcasts === 1 ? "hold" : "forward";
    try {
      // The first send's broadcast is held; the second is given nonce 1 meanwhile.
      const first = send("1");
      const held = await eventually(async () => gate.held[0]);
      const second = await send("2");
      expect(second.status, second.text).toBe(201);
      // Then the node refuses the first for good, and cannot be reached to fill its nonce.
      gate.decide = () => "drop";
      const { id } = JSON.parse(held.body) as { id: number };
      held.answer(
        JSON.stringify({
          jsonrpc: "2.0",
          id,
          error: { code: -32000, message: "insufficient funds for gas * price + value" },
        }),
      );
      gate.held.splice(0);
      const refused = await first;
      expect(refused.status, refused.text).toBe(502);
      expect(expectErrorShape(refused).reason).toBe("broadcast_rejected");
      gate.decide = () => "forward";
      const records = (await server.api.get(`/v1/wallets/${wallet.body.id}/transactions?type=send`, apiKey))
        .body.data as { id: string; status: string; amount: string }[];
      expect(records.find((t) => t.amount === "1")?.status).toBe("failed");
      // The confirmer finds the gap the refused nonce left and fills it: the second send lands.
      const settled = await waitForSettled(server.api, apiKey, second.body.id);
      expect(settled.status).toBe("confirmed");
    } finally {
      gate.openUp();
    }
  });
});

/** A service whose EVM faucet pays from a funded key of its own, its RPC through the gate. */
async function serverWithFaucet(): Promise<TestServer> {
  const faucet = evmKey();
  await fundEvm(await sharedDevnet(), faucet.address, { eth: 10n ** 19n, usdc: 10_000n * USDC });
  return createTestServer({
    env: {
      ...(await evmThroughGate(gate)),
      SVC_FAUCET_EVM_PRIVATE_KEY: `0x${faucet.privateKey.toString("hex")}`,
    },
  });
}

describe("a faucet payment whose broadcast goes unanswered", () => {
  it.each([504, 200])(
    "answered HTTP %i: keeps its grant counted against the cap, for the payment lands",
    async (status) => {
      const withFaucet = await serverWithFaucet();
      try {
        const owner = await seedAccount(withFaucet.api);
        const wallet = await withFaucet.api.post(
          "/v1/wallets",
          { name: "faucet", chains: ["base"] },
          owner.apiKey,
        );
        expect(wallet.status, wallet.text).toBe(201);
        const askFull = () =>
          withFaucet.api.post(
            `/v1/wallets/${wallet.body.id}/faucet`,
            { chain: "base", token: "USDC", amount: "1000" },
            owner.apiKey,
          );
        gate.decide = firstBroadcastTimedOutAtGateway(status);
        const unanswered = askFull();
        let answered: Awaited<typeof unanswered> | undefined;
        void unanswered.then((response) => {
          answered = response;
        });
        // The payment reaches the node once the service has asked about it and found nothing yet.
        await eventually(async () => gate.held[0] !== undefined || answered !== undefined, {
          describe: "the payment's broadcast at the gateway",
        });
        expect(answered, `answered before its payment was broadcast: ${answered?.text}`).toBeUndefined();
        gate.openUp();
        // Not refused: once the payment is confirmed, it is the answer.
        expect((await unanswered).status).toBe(201);
        await eventually(async () =>
          (await base.getBalance(wallet.body.evm.address, usdc)) === 1_000n * USDC ? true : undefined,
        );
        const again = await askFull();
        expect(again.status, again.text).toBe(400);
        expect(expectErrorShape(again).reason).toBe("faucet_cap_exceeded");
        expect(await base.getBalance(wallet.body.evm.address, usdc)).toBe(1_000n * USDC);
      } finally {
        gate.openUp();
        await withFaucet.close();
      }
    },
  );
});

describe("a faucet payment whose receipt a lagging node does not show yet", () => {
  it("is not taken for dropped: answered once it shows, its grant kept, so the cap holds", async () => {
    const withFaucet = await serverWithFaucet();
    // Behind a load balancer, the node that serves receipts learns of a block 1.5 s after the one that
    // counts nonces: meanwhile the payment's nonce is used and its receipt is missing.
    const firstAsked = new Map<string, number>();
    gate.decide = ({ methods, body }) => {
      if (methods.length !== 1 || methods[0] !== "eth_getTransactionReceipt") return "forward";
      const { id, params } = JSON.parse(body) as { id: number; params: [string] };
      const first = firstAsked.get(params[0]) ?? Date.now();
      firstAsked.set(params[0], first);
      if (Date.now() - first > 1_500) return "forward";
      return { gatewayAnswers: { status: 200, body: JSON.stringify({ jsonrpc: "2.0", id, result: null }) } };
    };
    try {
      const owner = await seedAccount(withFaucet.api);
      const wallet = (
        await withFaucet.api.post("/v1/wallets", { name: "lag", chains: ["base"] }, owner.apiKey)
      ).body;
      const askFull = () =>
        withFaucet.api.post(
          `/v1/wallets/${wallet.id}/faucet`,
          { chain: "base", token: "USDC", amount: "1000" },
          owner.apiKey,
        );
      const paid = await askFull();
      expect(paid.status, paid.text).toBe(201);
      const again = await askFull();
      expect(again.status, again.text).toBe(400);
      expect(expectErrorShape(again).reason).toBe("faucet_cap_exceeded");
      expect(await base.getBalance(wallet.evm.address, usdc)).toBe(1_000n * USDC);
    } finally {
      gate.openUp();
      await withFaucet.close();
    }
  });
});
