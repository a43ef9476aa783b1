/**
 * The history's promise, checked end to end: every unit that enters or leaves a wallet on chain is in its
 * records. A seeded random workload (faucet payments, transfers in from outside the service, sends between
 * wallets and out, refused sends, concurrent sends from one wallet, x402 payments, a held spend approved and
 * one rejected) runs against one service on the local chains; once everything has settled, for each wallet
 * and token the chain's balance, the balance the service reports and the sum over the wallet's history
 * (confirmed receives less confirmed spends less the native coin the records say each spend cost) are one
 * figure. `RECONCILE_SEED=<n>` replays a run; a failure names its seed.
 */
import type { Address } from "@solana/kit";
import { fundEvm, fundSolana } from "@svc/devnet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ChainClient, TokenInfo } from "../src/chains/types.ts";
import { formatUnits, parseUnitsStrict } from "../src/internal/money.ts";
import { devnetClients, evmKey, signedTransfer, solanaKey } from "./support/chains.ts";
import { eventually } from "./support/eventually.ts";
import { waitForSettled } from "./support/spends.ts";
import {
  type ApiResponse,
  createTestServer,
  expectErrorShape,
  seedAccount,
  sharedDevnet,
  type TestServer,
} from "./support/test-server.ts";

type ChainName = "base" | "solana";
interface WalletView {
  id: string;
  evm: { address: `0x${string}` };
  solana: { address: Address };
}
interface TransactionView {
  id: string;
  type: "send" | "receive" | "x402";
  amount: string;
  token: string;
  chain: ChainName;
  from: string;
  to: string;
  txHash?: string;
  status: string;
  fee?: { amount: string; token: string };
}

const OPERATIONS = 60;
const seed = Number(process.env.RECONCILE_SEED ?? Math.floor(Math.random() * 2 ** 31));

let server: TestServer;
let apiKey: string;
let chains: Record<ChainName, ChainClient>;
let devnet: Awaited<ReturnType<typeof sharedDevnet>>;
let x402Url: string;

beforeAll(async () => {
  devnet = await sharedDevnet();
  server = await createTestServer({ x402Demo: true });
  ({ apiKey } = await seedAccount(server.api, "reconcile"));
  chains = await devnetClients(devnet);
  const started = server.logs.lines.map((line) => JSON.parse(line)).find((line) => line.x402Demo);
  x402Url = started.x402Demo.url;
});
afterAll(() => server.close());

/** mulberry32: a small seeded generator, so a run replays from its seed. */
function random(from: number): () => number {
  let state = from >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const tokenOf = (chain: ChainName, symbol: string): TokenInfo => {
  const client = chains[chain];
  const token = [client.config.nativeToken, ...client.config.tokens].find((t) => t.symbol === symbol);
  if (!token) throw new Error(`no ${symbol} on ${chain}`);
  return token;
};
const addressOn = (wallet: WalletView, chain: ChainName) =>
  chain === "base" ? wallet.evm.address : wallet.solana.address;
const atomic = (amount: string, token: TokenInfo) => {
  const value = parseUnitsStrict(amount, token.decimals);
  if (value === undefined) throw new Error(`not an amount of ${token.symbol}: ${amount}`);
  return value;
};

/** Every row of a wallet's history, page by page. */
async function fullHistory(walletId: string): Promise<TransactionView[]> {
  const rows: TransactionView[] = [];
  for (let offset = 0; ; offset += 100) {
    const page = await server.api.get(
      `/v1/wallets/${walletId}/transactions?limit=100&offset=${offset}`,
      apiKey,
    );
    if (page.status !== 200) throw new Error(`history of ${walletId}: ${page.text}`);
    rows.push(...page.body.data);
    if (rows.length >= page.body.total) return rows;
  }
}

describe("reconciliation: the records account for every unit on chain", () => {
  it("after a random mixed workload, chain balance == reported balance == sum over the history, per wallet and token", async () => {
    try {
      await runWorkloadAndReconcile(random(seed));
    } catch (error) {
      if (error instanceof Error) error.message = `[RECONCILE_SEED=${seed}] ${error.message}`;
      throw error;
    }
  }, 240_000);
});

async function runWorkloadAndReconcile(next: () => number): Promise<void> {
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)] as T;
  /** A random amount of `symbol` small enough for every wallet's policy ($5 at most at the devnet's prices). */
  const smallAmount = (symbol: string): string => {
    const units = 1 + Math.floor(next() * 450); // 1..450
    if (symbol === "USDC") return formatUnits(BigInt(units) * 10_000n, 6); // 0.01..4.5
    if (symbol === "ETH") return formatUnits(BigInt(units) * 10n ** 12n, 18); // 0.000001..0.00045 ($0.003..$1.35)
    return formatUnits(BigInt(units) * 50_000n + 1_000_000n, 9); // SOL 0.00105..0.0235: above a new account's rent
  };
  const createWallet = async (name: string, policy?: Record<string, unknown>) => {
    const response = await server.api.post(
      "/v1/wallets",
      { name, chains: ["base", "solana"], ...(policy ? { policy } : {}) },
      apiKey,
    );
    if (response.status !== 201) throw new Error(response.text);
    return response.body as WalletView;
  };
  const wallets = [
    await createWallet("free"),
    await createWallet("capped", { maxPerTx: "25" }),
    await createWallet("held", { approvalAbove: "5" }),
  ] as const;
  const [, capped, held] = wallets;

  // The outside world: one funded key per chain, paying the wallets through the chain, not the service.
  const outsideEvm = evmKey();
  const outsideSolana = await solanaKey();
  await fundEvm(devnet, outsideEvm.address, { eth: 10n ** 18n, usdc: 1_000_000_000n });
  await fundSolana(devnet, outsideSolana.address, { sol: 5_000_000_000n, usdc: 1_000_000_000n });

  /** Sends accepted by the service, to be awaited; transfers in from outside, to be found in a history. */
  const accepted: string[] = [];
  /** Every spend the service recorded, by id, and how it must end; a refused one is recorded nowhere. */
  const spends = new Map<string, "confirmed" | "rejected">();
  const incoming: { walletId: string; txHash: string }[] = [];
  const log: string[] = [];

  const expectRefused = (response: ApiResponse, status: number, reason: string) => {
    expect(response.status, response.text).toBe(status);
    expect(expectErrorShape(response).reason).toBe(reason);
  };
  const send = (wallet: WalletView, chain: ChainName, token: string, to: string, amount: string) =>
    server.api.post(`/v1/wallets/${wallet.id}/send`, { to, amount, token, chain }, apiKey);

  // Every wallet starts with something on each chain, so most sends have funds.
  for (const wallet of wallets) {
    for (const [chain, token, amount] of [
      ["base", "ETH", "0.05"],
      ["base", "USDC", "60"],
      ["solana", "SOL", "1"],
      ["solana", "USDC", "60"],
    ] as const) {
      const paid = await server.api.post(`/v1/wallets/${wallet.id}/faucet`, { chain, token, amount }, apiKey);
      expect(paid.status, paid.text).toBe(201);
    }
  }

  const operations: Record<string, () => Promise<void>> = {
    faucet: async () => {
      const wallet = pick(wallets);
      const chain = pick(["base", "solana"] as const);
      const token = pick(chain === "base" ? ["ETH", "USDC"] : ["SOL", "USDC"]);
      const amount = smallAmount(token);
      const paid = await server.api.post(`/v1/wallets/${wallet.id}/faucet`, { chain, token, amount }, apiKey);
      expect(paid.status, paid.text).toBe(201);
    },
    incoming: async () => {
      const wallet = pick(wallets);
      const chain = pick(["base", "solana"] as const);
      const symbol = pick(chain === "base" ? ["ETH", "USDC"] : ["SOL", "USDC"]);
      const token = tokenOf(chain, symbol);
      const amount = atomic(smallAmount(symbol), token);
      const signed = await signedTransfer(chains[chain], {
        privateKey: chain === "base" ? outsideEvm.privateKey : outsideSolana.privateKey,
        to: addressOn(wallet, chain),
        token,
        amount,
      });
      await chains[chain].broadcast(signed);
      incoming.push({ walletId: wallet.id, txHash: signed.txHash });
    },
    sendBetweenWallets: async () => {
      const from = pick(wallets);
      const to = pick(wallets.filter((w) => w !== from));
      const chain = pick(["base", "solana"] as const);
      const token = pick(chain === "base" ? ["ETH", "USDC"] : ["SOL", "USDC"]);
      const sent = await send(from, chain, token, addressOn(to, chain), smallAmount(token));
      expect(sent.status, sent.text).toBe(201);
      accepted.push(sent.body.id);
    },
    sendOut: async () => {
      const from = pick(wallets);
      const chain = pick(["base", "solana"] as const);
      const token = pick(chain === "base" ? ["ETH", "USDC"] : ["SOL", "USDC"]);
      // A fresh address: on Solana, a USDC send opens its token account, paid for by the wallet.
      const to = chain === "base" ? evmKey().address : (await solanaKey()).address;
      const sent = await send(from, chain, token, to, smallAmount(token));
      expect(sent.status, sent.text).toBe(201);
      accepted.push(sent.body.id);
    },
    sendToItself: async () => {
      const wallet = pick(wallets);
      const chain = pick(["base", "solana"] as const);
      const token = pick(chain === "base" ? ["ETH", "USDC"] : ["SOL", "USDC"]);
      const sent = await send(wallet, chain, token, addressOn(wallet, chain), smallAmount(token));
      expect(sent.status, sent.text).toBe(201);
      accepted.push(sent.body.id);
    },
    refused: async () => {
      const kind = pick(["policy", "funds", "input"] as const);
      const chain = pick(["base", "solana"] as const);
      if (kind === "policy") {
        expectRefused(
          await send(capped, chain, "USDC", addressOn(wallets[0], chain), "30"),
          403,
          "max_per_tx",
        );
      } else if (kind === "funds") {
        const response = await send(wallets[0], chain, "USDC", addressOn(capped, chain), "100000");
        expectRefused(response, 422, "insufficient_token");
      } else {
        const to = chain === "base" ? "0x123" : wallets[0].evm.address;
        expectRefused(await send(pick(wallets), chain, "USDC", to, "1"), 400, "invalid_address");
      }
    },
    concurrentSends: async () => {
      const from = pick(wallets);
      const chain = pick(["base", "solana"] as const);
      const token = pick(chain === "base" ? ["ETH", "USDC"] : ["SOL", "USDC"]);
      const answers = await Promise.all(
        Array.from({ length: 4 }, () =>
          send(
            from,
            chain,
            token,
            addressOn(pick(wallets.filter((w) => w !== from)), chain),
            smallAmount(token),
          ),
        ),
      );
      for (const answer of answers) {
        // Sends past what the wallet holds, less what those before them take, are refused; none is lost.
        if (answer.status === 422) continue;
        expect(answer.status, answer.text).toBe(201);
        accepted.push(answer.body.id);
      }
    },
    x402: async () => {
      const paid = await server.api.post(
        "/v1/x402/fetch",
        { walletId: pick(wallets).id, url: x402Url },
        apiKey,
      );
      expect(paid.status, paid.text).toBe(200);
      expect(paid.body.transaction).toMatchObject({ type: "x402", status: "confirmed" });
      spends.set(paid.body.transaction.id, "confirmed");
    },
    approved: async () => {
      const asked = await send(held, "base", "USDC", addressOn(wallets[0], "base"), "6");
      expect(asked.status, asked.text).toBe(202);
      const approved = await server.api.post(`/v1/approvals/${asked.body.id}/approve`, undefined, apiKey);
      expect(approved.status, approved.text).toBe(200);
      accepted.push(asked.body.id);
    },
    rejected: async () => {
      const asked = await send(held, "solana", "USDC", addressOn(wallets[1], "solana"), "7");
      expect(asked.status, asked.text).toBe(202);
      const rejected = await server.api.post(`/v1/approvals/${asked.body.id}/reject`, undefined, apiKey);
      expect(rejected.status, rejected.text).toBe(200);
      spends.set(asked.body.id, "rejected");
    },
  };
  const weighted = [
    ...Array(2).fill("faucet"),
    ...Array(3).fill("incoming"),
    ...Array(4).fill("sendBetweenWallets"),
    ...Array(3).fill("sendOut"),
    "sendToItself",
    ...Array(2).fill("refused"),
    "concurrentSends",
    "x402",
  ] as string[];

  // Every kind of operation once (so each run has them all: a held spend approved and one rejected among
  // them), the rest drawn by weight; in an order the seed decides.
  const plan = [...Object.keys(operations)];
  while (plan.length < OPERATIONS) plan.push(pick(weighted));
  for (let i = plan.length - 1; i > 0; i--) {
    const j = Math.floor(next() * (i + 1));
    [plan[i], plan[j]] = [plan[j] as string, plan[i] as string];
  }
  for (const name of plan) {
    log.push(name);
    await operations[name]?.();
  }

  // Everything settles: each accepted spend ends, each transfer in from outside is recorded.
  for (const id of accepted) {
    const settled = await waitForSettled(server.api, apiKey, id);
    expect(settled.status, `${id} after ${log.join(",")}`).toBe("confirmed");
    spends.set(id, "confirmed");
  }
  for (const { walletId, txHash } of incoming) {
    await eventually(async () => (await fullHistory(walletId)).some((r) => r.txHash === txHash), {
      describe: `the transfer in ${txHash} in the history of ${walletId}`,
    });
  }

  const mismatches: string[] = [];
  /** The spends the histories hold, by id, with their status. */
  const recordedSpends = new Map<string, string>();
  for (const wallet of wallets) {
    // Transfers between wallets (and a wallet's to itself) reach the recipient's history through the watcher:
    // wait until it holds a receive of each confirmed send to it.
    const history = await eventually(
      async () => {
        const rows = await fullHistory(wallet.id);
        if (rows.some((r) => r.status === "pending" || r.status === "pending_approval")) return undefined;
        const sentHere = (await Promise.all(wallets.map((w) => (w === wallet ? rows : fullHistory(w.id)))))
          .flat()
          .filter((r) => r.type === "send" && r.status === "confirmed")
          .filter((r) => r.to === addressOn(wallet, r.chain));
        const received = new Set(rows.filter((r) => r.type === "receive").map((r) => r.txHash));
        return sentHere.every((r) => received.has(r.txHash)) ? rows : undefined;
      },
      { describe: `the history of ${wallet.id} to settle` },
    );

    for (const row of history.filter((r) => r.type !== "receive")) {
      recordedSpends.set(row.id, row.status);
      // A rejected spend was never signed: nothing on chain, no fee.
      if (row.status === "rejected") expect(row).not.toHaveProperty("txHash");
    }

    // No on-chain transfer is recorded twice in one wallet.
    const keys = history.map((r) => `${r.chain}:${r.txHash}:${r.type}`);
    expect(keys.filter((key, i) => keys.indexOf(key) !== i)).toEqual([]);

    const reported = await server.api.get(`/v1/wallets/${wallet.id}/balance`, apiKey);
    expect(reported.status, reported.text).toBe(200);
    for (const chain of ["base", "solana"] as const) {
      for (const token of [chains[chain].config.nativeToken, ...chains[chain].config.tokens]) {
        const onChain = await chains[chain].getBalance(addressOn(wallet, chain), token);
        const shown = (reported.body.balances as { chain: string; token: string; amount: string }[]).find(
          (b) => b.chain === chain && b.token === token.symbol,
        );
        let recorded = 0n;
        for (const row of history.filter((r) => r.chain === chain)) {
          // What a spend cost beyond its amount; one that failed on chain moved none of its amount, but paid this.
          if (row.fee?.token === token.symbol) recorded -= atomic(row.fee.amount, token);
          if (row.token !== token.symbol || row.status !== "confirmed") continue;
          recorded += row.type === "receive" ? atomic(row.amount, token) : -atomic(row.amount, token);
        }
        const shownAtomic = shown && atomic(shown.amount, token);
        if (shownAtomic !== onChain || recorded !== onChain) {
          mismatches.push(
            `${wallet.id} ${chain} ${token.symbol}: chain ${onChain}, reported ${shownAtomic}, history ${recorded} (off by ${onChain - recorded})`,
          );
        }
      }
    }
  }
  expect(mismatches, `after ${log.join(",")}`).toEqual([]);
  // Every spend asked for is recorded once and ended as it should (none failed, none left pending); a refused
  // one is recorded nowhere.
  const byId = (entries: Iterable<[string, string]>) => [...entries].sort(([a], [b]) => a.localeCompare(b));
  expect(byId(recordedSpends), `after ${log.join(",")}`).toEqual(byId(spends));
}
