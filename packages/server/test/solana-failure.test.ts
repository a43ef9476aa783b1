import { type Base64EncodedWireTransaction, createSolanaRpc } from "@solana/kit";
import { fundSolana } from "@svc/devnet";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ChainClient, TokenInfo } from "../src/chains/types.ts";
import { transactions } from "../src/internal/db/schema.ts";
import { formatUsd } from "../src/internal/money.ts";
import { devnetClients, solanaKey, tokenAccountRentUsd } from "./support/chains.ts";
import { eventually } from "./support/eventually.ts";
import { openStoredKey } from "./support/keys.ts";
import { RpcGate } from "./support/rpc-gate.ts";
import {
  createTestServer,
  expectErrorShape,
  seedAccount,
  sharedDevnet,
  solanaThroughGate,
  type TestServer,
} from "./support/test-server.ts";

let server: TestServer;
let gate: RpcGate;
let solana: ChainClient;
let usdc: TokenInfo;
let devnet: Awaited<ReturnType<typeof sharedDevnet>>;

beforeAll(async () => {
  devnet = await sharedDevnet();
  gate = await RpcGate.start(devnet.solana.rpcUrl);
  server = await createTestServer({
    env: {
      ...(await solanaThroughGate(gate)),
      // The confirmer makes its start-up pass only; this test runs its passes by hand.
      SVC_CONFIRMER_INTERVAL_MS: "3600000",
    },
  });
  ({ solana } = await devnetClients(devnet));
  usdc = solana.config.tokens[0] as TokenInfo;
});
afterAll(async () => {
  await server.close();
  await gate.close();
});

describe("a Solana transfer that lands but fails in execution", () => {
  it("is reported failed, with the chain's error, and gives its amount back to the daily limit", async () => {
    const { apiKey } = await seedAccount(server.api);
    // Room for one $5 send, with the rent of the token account it opens for its recipient.
    const dailyLimit = formatUsd(5_000_000n + (await tokenAccountRentUsd(devnet, solana.config.nativeToken)));
    const wallet = (
      await server.api.post(
        "/v1/wallets",
        { name: "overdrawn", chains: ["solana"], policy: { dailyLimit } },
        apiKey,
      )
    ).body;
    await fundSolana(devnet, wallet.solana.address, { sol: 10n ** 9n, usdc: 5_000_000n });
    const [first, second] = [(await solanaKey()).address, (await solanaKey()).address];
    const send = (to: string, amount: string) =>
      server.api.post(`/v1/wallets/${wallet.id}/send`, { to, amount, chain: "solana" }, apiKey);

    // The first send's broadcast never reaches the node (its connection is cut): recorded, still pending.
    let firstRaw: string | undefined;
    gate.decide = ({ methods, body }) => {
      if (!methods.includes("sendTransaction")) return "forward";
      firstRaw ??= body;
      return body === firstRaw ? "drop" : "forward";
    };
    const pending = await send(first, "5");
    expect(pending.status, pending.text).toBe(201);
    expect(pending.body.status).toBe("pending");
    // The wallet's key, used directly, spends the 5 USDC elsewhere: the first can no longer succeed. (The
    // service itself admits no second send of them while the first may still land.)
    const key = await openStoredKey(server.service, wallet.id, "solana");
    const plan = await solana.planTransfer({
      from: wallet.solana.address,
      to: second,
      token: usdc,
      amount: 5_000_000n,
    });
    await solana.broadcast(await solana.signTransfer(plan, key));
    key.fill(0);
    await eventually(async () => (await solana.getBalance(second, usdc)) === 5_000_000n, {
      describe: "the transfer elsewhere to land",
    });

    // The first now reaches the chain through a node that skips preflight: it lands, fails in execution
    // (the token program's insufficient funds) and is charged its fee.
    const [recorded] = await server.service.store.db
      .select()
      .from(transactions)
      .where(eq(transactions.id, pending.body.id));
    const rpc = createSolanaRpc(devnet.solana.rpcUrl);
    await rpc
      .sendTransaction(recorded?.rawTx as Base64EncodedWireTransaction, {
        encoding: "base64",
        skipPreflight: true,
      })
      .send();
    await eventually(
      async () => {
        const { value } = await rpc
          .getSignatureStatuses([pending.body.txHash], { searchTransactionHistory: true })
          .send();
        return value[0]?.err ? value[0] : undefined;
      },
      { describe: "the first transfer to land failed" },
    );

    // Until the confirmer has seen it, its $5 (and its rent) still holds its place in the window.
    expect(expectErrorShape(await send(first, "5")).reason).toBe("daily_limit");
    // Each pass settles what the chain has finished; on a loaded machine the landed one may need another.
    const statusOf = async (id: string) => (await server.api.get(`/v1/transactions/${id}`, apiKey)).body;
    await eventually(
      async () => {
        await server.service.confirmer.runOnce();
        return (await statusOf(pending.body.id)).status !== "pending";
      },
      { describe: "the confirmer to settle the transfer" },
    );
    const failed = await statusOf(pending.body.id);
    expect(failed).toMatchObject({ id: pending.body.id, status: "failed", txHash: pending.body.txHash });
    expect(failed.failureReason).toContain("InstructionError");
    expect(await solana.getBalance(first, usdc)).toBe(0n);
    // The failed one was charged its fee, and states it; with the fee (and rent) of the transfer elsewhere,
    // what the wallet's SOL lost.
    expect(failed.fee).toEqual({ amount: "0.000005", token: "SOL" });
    const solSpent = 10n ** 9n - (await solana.getBalance(wallet.solana.address, solana.config.nativeToken));
    expect(5_000n + plan.fee).toBe(solSpent);
    // The owner is told, once, with the transaction as it ended.
    const failedEvents = await eventually(async () => {
      const page = await server.api.get(`/v1/events?walletId=${wallet.id}&type=transaction.failed`, apiKey);
      return page.body.data.length > 0 && page.body.data;
    });
    expect(failedEvents.map((e: any) => [e.data.id, e.data.status])).toEqual([[pending.body.id, "failed"]]);

    // Its $5 is back in the window: a $5 send is no longer over the limit; it is refused only for funds.
    const next = await send(first, "5");
    expect(next.status).toBe(422);
    expect(expectErrorShape(next).reason).toBe("insufficient_token");
  });
});
