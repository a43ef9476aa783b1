import { fundEvm, fundSolana } from "@svc/devnet";
import { sql } from "drizzle-orm";
import { createPublicClient, type Hex, http, keccak256 } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { selectRows } from "../src/internal/db/store.ts";
import { findToken } from "../src/spends/transfer.ts";
import { devnetClients, evmKey } from "./support/chains.ts";
import { eventually } from "./support/eventually.ts";
import { RpcGate } from "./support/rpc-gate.ts";
import {
  createTestServer,
  evmThroughGate,
  expectErrorShape,
  STORE_KIND,
  seedAccount,
  sharedDevnet,
  type TestServer,
} from "./support/test-server.ts";

let server: TestServer;
let apiKey: string;
beforeAll(async () => {
  server = await createTestServer();
  ({ apiKey } = await seedAccount(server.api));
});
afterAll(() => server.close());

async function createWallet(chains = ["base", "solana"]) {
  const response = await server.api.post("/v1/wallets", { name: "faucet test", chains }, apiKey);
  expect(response.status).toBe(201);
  return response.body as { id: string; evm?: { address: string }; solana?: { address: string } };
}

async function receives(walletId: string, chain: string) {
  const response = await server.api.get(
    `/v1/wallets/${walletId}/transactions?type=receive&chain=${chain}`,
    apiKey,
  );
  expect(response.status).toBe(200);
  return response.body as { data: Record<string, string>[]; total: number };
}

/**
 * Returns once the watcher has scanned past everything on `chain` so far: a marker wallet funded now from
 * outside is recorded only by a scan that covers every earlier block or slot.
 */
async function watcherPassed(chain: "base" | "solana"): Promise<void> {
  const devnet = await sharedDevnet();
  const marker = await createWallet([chain]);
  if (chain === "base") await fundEvm(devnet, marker.evm?.address as `0x${string}`, { eth: 1n });
  else await fundSolana(devnet, marker.solana?.address as never, { sol: 1_000_000n });
  await eventually(async () => ((await receives(marker.id, chain)).total > 0 ? true : undefined));
}

describe("faucet and balance", () => {
  it("starts a new wallet at zero on every chain and token, with exact USD values", async () => {
    const wallet = await createWallet();
    const response = await server.api.get(`/v1/wallets/${wallet.id}/balance`, apiKey);
    expect(response.status).toBe(200);
    expect(response.body).toEqual({
      walletId: wallet.id,
      balances: [
        { chain: "base", token: "ETH", amount: "0", usdValue: "0.00" },
        { chain: "base", token: "USDC", amount: "0", usdValue: "0.00" },
        { chain: "solana", token: "SOL", amount: "0", usdValue: "0.00" },
        { chain: "solana", token: "USDC", amount: "0", usdValue: "0.00" },
      ],
      totalUsdValue: "0.00",
      updatedAt: expect.any(String),
    });
  });

  for (const chain of ["base", "solana"] as const) {
    const native = chain === "base" ? "ETH" : "SOL";
    it(`pays USDC and ${native} on ${chain}: the balance moves by exactly the amount, one receive row each`, async () => {
      const wallet = await createWallet();
      const address = chain === "base" ? wallet.evm?.address : wallet.solana?.address;
      const usdc = await server.api.post(
        `/v1/wallets/${wallet.id}/faucet`,
        { chain, token: "USDC", amount: "25.5" },
        apiKey,
      );
      expect(usdc.status).toBe(201);
      expect(usdc.body).toMatchObject({
        walletId: wallet.id,
        type: "receive",
        amount: "25.5",
        token: "USDC",
        chain,
        to: address,
        status: "confirmed",
        txHash: expect.any(String),
      });
      expect(usdc.body.id).toMatch(/^tx_/);
      const coin = await server.api.post(
        `/v1/wallets/${wallet.id}/faucet`,
        { chain, token: native, amount: 0.25 },
        apiKey,
      );
      expect(coin.status).toBe(201);
      expect(coin.body).toMatchObject({
        type: "receive",
        amount: "0.25",
        token: native,
        status: "confirmed",
      });

      const balance = await server.api.get(`/v1/wallets/${wallet.id}/balance`, apiKey);
      const price = chain === "base" ? "750.00" : "37.50"; // 0.25 × 3000 or × 150
      expect(balance.body.balances.filter((b: { chain: string }) => b.chain === chain)).toEqual([
        { chain, token: native, amount: "0.25", usdValue: price },
        { chain, token: "USDC", amount: "25.5", usdValue: "25.50" },
      ]);
      expect(balance.body.totalUsdValue).toBe(chain === "base" ? "775.50" : "63.00");

      // The watcher sees the same payments on chain; they stay one row each.
      await watcherPassed(chain);
      const history = await receives(wallet.id, chain);
      expect(history.total).toBe(2);
      expect(history.data.map((t) => t.id).sort()).toEqual([usdc.body.id, coin.body.id].sort());
      expect((await server.api.get(`/v1/transactions/${usdc.body.id}`, apiKey)).body).toEqual(usdc.body);
    });
  }

  it("pays the default amount when none is given", async () => {
    const wallet = await createWallet(["solana"]);
    const response = await server.api.post(
      `/v1/wallets/${wallet.id}/faucet`,
      { chain: "solana", token: "usdc" },
      apiKey,
    );
    expect(response.status).toBe(201);
    expect(response.body).toMatchObject({ amount: "100", token: "USDC" });
  });

  it("caps each wallet per chain and token over 24 h, admitting exactly the cap under concurrent requests", async () => {
    const wallet = await createWallet(["base"]);
    const results = await Promise.all(
      Array.from({ length: 5 }, () =>
        server.api.post(
          `/v1/wallets/${wallet.id}/faucet`,
          { chain: "base", token: "USDC", amount: "300" },
          apiKey,
        ),
      ),
    );
    const statuses = results.map((r) => r.status).sort();
    expect(statuses).toEqual([201, 201, 201, 400, 400]);
    const refused = results.find((r) => r.status === 400);
    expect(refused && expectErrorShape(refused)).toMatchObject({
      code: "ValidationError",
      reason: "faucet_cap_exceeded",
      message: "Faucet cap of 1000 USDC per wallet per 24h on base exceeded: 900 used, this request is 300",
      details: { chain: "base", token: "USDC", cap: "1000", used: "900", requested: "300", remaining: "100" },
    });
    expect(new Date(refused?.body.error.details.resetsAt).getTime()).toBeGreaterThan(Date.now());
    const balance = await server.api.get(`/v1/wallets/${wallet.id}/balance`, apiKey);
    expect(balance.body.balances).toContainEqual({
      chain: "base",
      token: "USDC",
      amount: "900",
      usdValue: "900.00",
    });
    // The native coin has its own cap: 10 ETH.
    const eth = await server.api.post(
      `/v1/wallets/${wallet.id}/faucet`,
      { chain: "base", token: "ETH", amount: "10" },
      apiKey,
    );
    expect(eth.status).toBe(201);
    const over = await server.api.post(
      `/v1/wallets/${wallet.id}/faucet`,
      { chain: "base", token: "ETH", amount: "0.000001" },
      apiKey,
    );
    expect(expectErrorShape(over)).toMatchObject({
      reason: "faucet_cap_exceeded",
      details: { cap: "10", used: "10" },
    });
    // What was refused moved nothing and recorded nothing.
    expect((await receives(wallet.id, "base")).total).toBe(4);
  });

  it("refuses bad faucet requests with the error contract", async () => {
    const wallet = await createWallet(["base"]);
    const other = await seedAccount(server.api);
    const cases: [unknown, number, string][] = [
      [{ chain: "solana", token: "USDC" }, 400, "chain_not_in_wallet"],
      [{ chain: "dogecoin", token: "USDC" }, 400, "unknown_chain"],
      [{ chain: "base", token: "DOGE" }, 400, "unknown_token"],
      [{ chain: "base", token: "USDC", amount: "0" }, 400, "invalid_amount"],
      [{ chain: "base", token: "USDC", amount: "1.0000001" }, 400, "invalid_amount"],
      [{ chain: "base", token: "USDC", amount: "-1" }, 400, "invalid_amount"],
      [{ chain: "base" }, 400, "invalid_body"],
    ];
    for (const [body, status, reason] of cases) {
      const response = await server.api.post(`/v1/wallets/${wallet.id}/faucet`, body, apiKey);
      expect(response.status, JSON.stringify(body)).toBe(status);
      expect(expectErrorShape(response).reason, JSON.stringify(body)).toBe(reason);
    }
    const foreign = await server.api.post(
      `/v1/wallets/${wallet.id}/faucet`,
      { chain: "base", token: "USDC" },
      other.apiKey,
    );
    expect(foreign.status).toBe(404);
    expect((await server.api.get(`/v1/wallets/${wallet.id}/balance`, other.apiKey)).status).toBe(404);
    expect((await receives(wallet.id, "base")).total).toBe(0);
  });

  it("refuses SOL too little for a new account (its rent exemption) with 400, and pays nothing", async () => {
    const wallet = await createWallet(["solana"]);
    const dust = await server.api.post(
      `/v1/wallets/${wallet.id}/faucet`,
      { chain: "solana", token: "SOL", amount: "0.000000001" },
      apiKey,
    );
    expect(dust.status, dust.text).toBe(400);
    expect(expectErrorShape(dust)).toMatchObject({
      code: "ValidationError",
      reason: "below_rent_minimum",
      details: { chain: "solana", account: "recipient", token: "SOL", resulting: "0.000000001" },
    });
    // Nothing was paid: the one receive is the payment after it.
    const paid = await server.api.post(
      `/v1/wallets/${wallet.id}/faucet`,
      { chain: "solana", token: "SOL" },
      apiKey,
    );
    expect(paid.status, paid.text).toBe(201);
    expect((await receives(wallet.id, "solana")).total).toBe(1);
  });
});

describe("the faucet behind a load balancer whose nodes take turns, one of them behind", () => {
  it("answers the confirmed payment with its receive, though the node asked next does not show it yet", async () => {
    const gate = await RpcGate.start((await sharedDevnet()).evm.rpcUrl);
    // Every other receipt lookup reaches a node that has not seen the transaction yet.
    let receiptLookups = 0;
    let behindAnswers = 0;
    gate.decide = ({ methods, body }) => {
      if (methods.length !== 1 || methods[0] !== "eth_getTransactionReceipt" || ++receiptLookups % 2 === 1)
        return "forward";
      behindAnswers++;
      const { id } = JSON.parse(body) as { id: number };
      return { gatewayAnswers: { status: 200, body: JSON.stringify({ jsonrpc: "2.0", id, result: null }) } };
    };
    const faucetKey = generatePrivateKey();
    await fundEvm(await sharedDevnet(), privateKeyToAccount(faucetKey).address, {
      eth: 10n ** 18n,
      usdc: 100_000_000n,
    });
    const balanced = await createTestServer({
      env: { ...(await evmThroughGate(gate)), SVC_FAUCET_EVM_PRIVATE_KEY: faucetKey },
    });
    try {
      const owner = await seedAccount(balanced.api);
      const wallet = await balanced.api.post(
        "/v1/wallets",
        { name: "balanced", chains: ["base"] },
        owner.apiKey,
      );
      const paid = await balanced.api.post(
        `/v1/wallets/${wallet.body.id}/faucet`,
        { chain: "base", token: "USDC", amount: "3" },
        owner.apiKey,
      );
      expect(paid.status, paid.text).toBe(201);
      expect(paid.body).toMatchObject({ type: "receive", amount: "3", status: "confirmed" });
      expect(behindAnswers).toBeGreaterThan(0);
      const listed = await balanced.api.get(
        `/v1/wallets/${wallet.body.id}/transactions?type=receive`,
        owner.apiKey,
      );
      expect(listed.body.data.map((t: { id: string }) => t.id)).toEqual([paid.body.id]);
    } finally {
      await balanced.close();
      await gate.close();
    }
  });
});

describe("the faucet behind a load balancer whose node lags the one it broadcast to", () => {
  it("pays a second payment like the first its own transaction, though the node plans it as the first", async () => {
    const devnet = await sharedDevnet();
    const gate = await RpcGate.start(devnet.evm.rpcUrl);
    // Every read is answered by the node and remembered by its method and parameters. From the first
    // payment's broadcast until the next broadcast, the reads asked before it are answered as they were then:
    // a node a block behind plans the second payment as the first (same nonce, gas and fees).
    const seen = new Map<string, unknown>();
    let behind: Map<string, unknown> | undefined;
    let broadcasts = 0;
    const keyOf = (call: { method: string; params?: unknown }) =>
      `${call.method} ${JSON.stringify(call.params)}`;
    gate.decide = ({ methods }) => {
      if (methods.includes("eth_sendRawTransaction")) {
        broadcasts++;
        behind = broadcasts === 1 ? new Map(seen) : undefined;
        return "forward";
      }
      // Held, then answered here once the gate has taken it (it holds a request after deciding).
      setImmediate(answerHeld);
      return "hold";
    };
    /** Answers the requests the gate holds: from the lagging node's memory, or from the node. */
    const answerHeld = () => {
      for (const held of gate.held.splice(0)) {
        const parsed = JSON.parse(held.body) as
          | { id: number; method: string; params?: unknown }[]
          | { id: number; method: string; params?: unknown };
        const calls = Array.isArray(parsed) ? parsed : [parsed];
        const lagging = behind;
        if (lagging && calls.every((call) => lagging.has(keyOf(call)))) {
          const answers = calls.map((call) => ({
            jsonrpc: "2.0",
            id: call.id,
            result: lagging.get(keyOf(call)),
          }));
          held.answer(JSON.stringify(Array.isArray(parsed) ? answers : answers[0]));
          continue;
        }
        void fetch(devnet.evm.rpcUrl, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: held.body,
        })
          .then((response) => response.text())
          .then(
            (text) => {
              const answered = JSON.parse(text) as
                | { id: number; result?: unknown }
                | { id: number; result?: unknown }[];
              for (const answer of Array.isArray(answered) ? answered : [answered]) {
                const call = calls.find((c) => c.id === answer.id);
                if (call && "result" in answer) seen.set(keyOf(call), answer.result);
              }
              held.answer(text);
            },
            () => held.drop(),
          );
      }
    };
    const faucet = evmKey();
    await fundEvm(devnet, faucet.address, { eth: 10n ** 19n, usdc: 10_000n * 10n ** 6n });
    const server = await createTestServer({
      env: {
        ...(await evmThroughGate(gate)),
        SVC_FAUCET_EVM_PRIVATE_KEY: `0x${faucet.privateKey.toString("hex")}`,
      },
    });
    try {
      const owner = await seedAccount(server.api);
      const created = await server.api.post(
        "/v1/wallets",
        { name: "lagging", chains: ["base"] },
        owner.apiKey,
      );
      const wallet = created.body as { id: string; evm: { address: string } };
      const pay = () =>
        server.api.post(
          `/v1/wallets/${wallet.id}/faucet`,
          { chain: "base", token: "USDC", amount: "1" },
          owner.apiKey,
        );
      const first = await pay();
      const second = await pay();
      const { base } = await devnetClients(devnet);
      expect({
        answers: [first.status, second.status],
        transactions: new Set([first.body.txHash, second.body.txHash]).size,
        received: (await base.getBalance(wallet.evm.address, findToken(base, "USDC"))) / 10n ** 6n,
      }).toEqual({ answers: [201, 201], transactions: 2, received: 2n });
    } finally {
      await server.close();
      await gate.close();
    }
  });
});

describe.runIf(STORE_KIND === "postgres")(
  "the faucet of two instances paying from one key on one PostgreSQL",
  () => {
    it("pays each success its own transaction, landed, and records one grant per payment, when both sign the same one", async () => {
      const devnet = await sharedDevnet();
      const gate = await RpcGate.start(devnet.evm.rpcUrl);
      const faucet = evmKey();
      await fundEvm(devnet, faucet.address, { eth: 10n ** 19n, usdc: 10_000n * 10n ** 6n });
      const env = {
        ...(await evmThroughGate(gate)),
        SVC_FAUCET_EVM_PRIVATE_KEY: `0x${faucet.privateKey.toString("hex")}`,
      };
      const a = await createTestServer({ env });
      const b = await createTestServer({ env, store: a.storeLocation });
      // In each round, the first payment broadcast waits at the gate until another is: both instances have then
      // planned theirs before the node saw either (same nonce), as when two are asked at the same moment.
      const node = createPublicClient({ transport: http(devnet.evm.rpcUrl) });
      const rawOf = (body: string) => (JSON.parse(body) as { params: [Hex] }).params[0];
      let pairing = false;
      let sameBytes = 0;
      gate.decide = ({ methods, body }) => {
        if (!pairing || methods.length !== 1 || methods[0] !== "eth_sendRawTransaction") return "forward";
        const first = gate.held.shift();
        if (!first) return "hold";
        pairing = false;
        first.release();
        if (rawOf(first.body) === rawOf(body)) {
          sameBytes++;
          return "forward";
        }
        // Signed differently (the instances read the fees at different blocks): the second reaches the node
        // once the first is mined, as one sent a moment later does (not beside it, where a higher fee would
        // replace it in the pool).
        const hash = keccak256(rawOf(first.body));
        void eventually(() => node.request({ method: "eth_getTransactionReceipt", params: [hash] }))
          .catch(() => undefined)
          .then(() => gate.held.shift()?.release());
        return "hold";
      };
      try {
        const owner = await seedAccount(a.api);
        const created = await a.api.post(
          "/v1/wallets",
          { name: "shared faucet", chains: ["base"] },
          owner.apiKey,
        );
        expect(created.status, created.text).toBe(201);
        const wallet = created.body as { id: string; evm: { address: string } };
        // Both instances are asked for the same payment at once (same wallet, token and amount), until they
        // have signed it alike three times (they sign it differently when each read the fees at another block).
        const answers = [];
        for (let round = 0; sameBytes < 3 && round < 30; round++) {
          pairing = true;
          answers.push(
            ...(await Promise.all(
              [a, b].map((server) =>
                server.api.post(
                  `/v1/wallets/${wallet.id}/faucet`,
                  { chain: "base", token: "USDC", amount: "1" },
                  owner.apiKey,
                ),
              ),
            )),
          );
        }
        expect(sameBytes, "rounds in which both instances broadcast the same transaction").toBe(3);
        const grants = await selectRows<{ tx_hash: string | null }>(
          a.service.store.db,
          sql`SELECT tx_hash FROM faucet_grants`,
        );
        const { base } = await devnetClients(devnet);
        const received = await base.getBalance(wallet.evm.address, findToken(base, "USDC"));
        const paid = answers.filter((answer) => answer.status === 201);
        expect({
          answers: answers.map((answer) => answer.status),
          received: received / 10n ** 6n,
          transactionsAnswered: new Set(paid.map((answer) => answer.body.txHash)).size,
          grants: grants.length,
          transactionsGranted: new Set(grants.map((grant) => grant.tx_hash)).size,
        }).toEqual({
          answers: answers.map(() => 201),
          received: BigInt(answers.length),
          transactionsAnswered: answers.length,
          grants: answers.length,
          transactionsGranted: answers.length,
        });
      } finally {
        await b.close();
        await a.close();
        await gate.close();
      }
    });
  },
);
