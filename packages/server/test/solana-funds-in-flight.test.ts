/**
 * Simultaneous Solana sends from one wallet, each planned against the whole balance before the wallet's spend
 * lock: under the lock, the sends admitted before them and not yet in the balances they read are counted
 * (checkFundsInFlight), so only what the wallet holds is admitted and the rest is refused before anything is
 * signed. The service reaches the Solana runtime through an RpcGate that holds every broadcast until each
 * request has been decided, so that every one plans against the funds as first given.
 */
import { randomBytes } from "node:crypto";
import { createSolanaRpc, getBase58Decoder } from "@solana/kit";
import { fundSolana } from "@svc/devnet";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ChainClient } from "../src/chains/types.ts";
import { RECENT_SENDS_READ } from "../src/spends/funds.ts";
import { findToken } from "../src/spends/transfer.ts";
import { devnetClients, solanaKey } from "./support/chains.ts";
import { eventually } from "./support/eventually.ts";
import { RpcGate } from "./support/rpc-gate.ts";
import { waitForSettled } from "./support/spends.ts";
import {
  createTestServer,
  expectErrorShape,
  seedAccount,
  sharedDevnet,
  solanaThroughGate,
  type TestServer,
} from "./support/test-server.ts";

const USDC = 1_000_000n;
const SOL = 1_000_000_000n;

let server: TestServer;
let gate: RpcGate;
let apiKey: string;
let solana: ChainClient;
let devnet: Awaited<ReturnType<typeof sharedDevnet>>;

beforeAll(async () => {
  devnet = await sharedDevnet();
  gate = await RpcGate.start(devnet.solana.rpcUrl);
  server = await createTestServer({ env: await solanaThroughGate(gate) });
  ({ apiKey } = await seedAccount(server.api));
  ({ solana } = await devnetClients(devnet));
});
afterAll(async () => {
  await server?.close();
  await gate?.close();
});

/**
 * A Solana wallet named `name` (with `policy`, if given) funded with `funds`, and a recipient whose USDC token
 * account is open (no rent to pay), funded with `recipientFunds` (default: 1 atomic unit of USDC).
 */
async function walletAndRecipient(
  name: string,
  funds: { sol: bigint; usdc: bigint },
  options: { policy?: Record<string, string>; recipientFunds?: { sol?: bigint; usdc: bigint } } = {},
) {
  const wallet = (
    await server.api.post(
      "/v1/wallets",
      { name, chains: ["solana"], ...(options.policy ? { policy: options.policy } : {}) },
      apiKey,
    )
  ).body;
  await fundSolana(devnet, wallet.solana.address, funds);
  const to = (await solanaKey()).address;
  await fundSolana(devnet, to, options.recipientFunds ?? { usdc: 1n });
  return { wallet, to };
}

/**
 * `count` simultaneous sends of `amount` of `token` from a wallet funded with `funds` to one recipient, whose
 * broadcasts wait at the gate until every request has been decided. Returns the answers, the wallet's sends
 * once settled, the wallet and the recipient.
 */
async function burstWhileBroadcastsWait(
  count: number,
  send: { token: "USDC" | "SOL"; amount: string },
  funds: { sol: bigint; usdc: bigint },
) {
  // The recipient also holds the rent-exempt SOL minimum.
  const { wallet, to } = await walletAndRecipient("burst", funds, {
    recipientFunds: { sol: SOL / 100n, usdc: 1n },
  });
  gate.decide = ({ methods }) => (methods.includes("sendTransaction") ? "hold" : "forward");
  let answered = 0;
  const answers = Promise.all(
    Array.from({ length: count }, () =>
      server.api
        .post(`/v1/wallets/${wallet.id}/send`, { to, chain: "solana", ...send }, apiKey)
        .finally(() => answered++),
    ),
  );
  try {
    await eventually(async () => gate.held.length + answered === count, {
      describe: "every send to be decided",
    });
  } finally {
    gate.openUp();
  }
  const responses = await answers;
  const admitted = responses.filter((r) => r.status === 201);
  const settled = await Promise.all(admitted.map((r) => waitForSettled(server.api, apiKey, r.body.id)));
  const history = (await server.api.get(`/v1/wallets/${wallet.id}/transactions?limit=100`, apiKey)).body
    .data as { type: string; status: string }[];
  return { responses, admitted, settled, history, wallet, to };
}

describe("Solana funds under concurrency", () => {
  it("admits only what the wallet holds of 8 simultaneous sends of 1 USDC from 3: the others 422 before signing, nothing failed in the history", async () => {
    const { responses, admitted, settled, history, to } = await burstWhileBroadcastsWait(
      8,
      { token: "USDC", amount: "1" },
      { sol: SOL / 10n, usdc: 3n * USDC },
    );
    expect(responses.map((r) => r.status).sort(), responses.map((r) => r.text).join("\n")).toEqual([
      201, 201, 201, 422, 422, 422, 422, 422,
    ]);
    for (const r of responses.filter((r) => r.status !== 201)) {
      expect(expectErrorShape(r)).toMatchObject({
        reason: "insufficient_token",
        message: expect.stringMatching(/3 sends not yet on chain/),
      });
    }
    expect(settled.map((t) => t.status)).toEqual(Array(admitted.length).fill("confirmed"));
    expect(history.filter((t) => t.type === "send").map((t) => t.status)).toEqual(Array(3).fill("confirmed"));
    expect(await solana.getBalance(to, findToken(solana, "USDC"))).toBe(3n * USDC + 1n);
  });

  it("admits only what the wallet holds of 6 simultaneous sends of 0.1 SOL from 0.35: the others 422", async () => {
    const { responses, settled, to } = await burstWhileBroadcastsWait(
      6,
      { token: "SOL", amount: "0.1" },
      { sol: (35n * SOL) / 100n, usdc: 0n },
    );
    expect(responses.map((r) => r.status).sort(), responses.map((r) => r.text).join("\n")).toEqual([
      201, 201, 201, 422, 422, 422,
    ]);
    for (const r of responses.filter((r) => r.status !== 201)) {
      expect(expectErrorShape(r)).toMatchObject({
        reason: "insufficient_token",
        message: expect.stringMatching(/0.3 is taken by 3 sends not yet on chain/),
      });
    }
    expect(settled.map((t) => t.status)).toEqual(Array(3).fill("confirmed"));
    expect(await solana.getBalance(to, solana.config.nativeToken)).toBe(SOL / 100n + (3n * SOL) / 10n);
  });

  it("counts the fees of sends not yet on chain against the SOL the wallet must keep: SOL for 3 fees above its rent exemption admits 3 of 5", async () => {
    const rentMinimum = await createSolanaRpc(devnet.solana.rpcUrl)
      .getMinimumBalanceForRentExemption(0n)
      .send();
    // One signature's fee is 5,000 lamports: a fourth send would leave the wallet 887,880 short of nothing
    // and below its rent exemption, which the chain refuses.
    const { responses, settled, history } = await burstWhileBroadcastsWait(
      5,
      { token: "USDC", amount: "1" },
      { sol: rentMinimum + 3n * 5_000n + 2_000n, usdc: 10n * USDC },
    );
    expect(responses.map((r) => r.status).sort(), responses.map((r) => r.text).join("\n")).toEqual([
      201, 201, 201, 400, 400,
    ]);
    for (const r of responses.filter((r) => r.status !== 201)) {
      expect(expectErrorShape(r)).toMatchObject({
        reason: "below_rent_minimum",
        details: { account: "sender", resulting: "0.00088788" },
        message: expect.stringMatching(/once this send and 3 sends not yet on chain are paid for/),
      });
    }
    expect(settled.map((t) => t.status)).toEqual(Array(3).fill("confirmed"));
    expect(history.filter((t) => t.type === "send").map((t) => t.status)).toEqual(Array(3).fill("confirmed"));
  });

  it("approves only what the wallet holds of held Solana spends approved at once: the other 422, still held", async () => {
    const { wallet, to } = await walletAndRecipient(
      "held",
      { sol: SOL / 10n, usdc: 5n * USDC },
      { policy: { approvalAbove: "1" } },
    );
    const held: string[] = [];
    for (let i = 0; i < 2; i++) {
      const asked = await server.api.post(
        `/v1/wallets/${wallet.id}/send`,
        { to, amount: "3", chain: "solana" },
        apiKey,
      );
      expect(asked.body.status, asked.text).toBe("pending_approval");
      held.push(asked.body.id);
    }
    gate.decide = ({ methods }) => (methods.includes("sendTransaction") ? "hold" : "forward");
    let answered = 0;
    const answers = Promise.all(
      held.map((id) =>
        server.api.post(`/v1/approvals/${id}/approve`, undefined, apiKey).finally(() => answered++),
      ),
    );
    try {
      await eventually(async () => gate.held.length + answered === 2, { describe: "both approvals decided" });
    } finally {
      gate.openUp();
    }
    const responses = await answers;
    expect(responses.map((r) => r.status).sort(), responses.map((r) => r.text).join("\n")).toEqual([
      200, 422,
    ]);
    const [approved, refused] = responses[0]?.status === 200 ? responses : [...responses].reverse();
    if (!approved || !refused) throw new Error("two answers expected");
    expect(expectErrorShape(refused).reason).toBe("insufficient_token");
    expect((await waitForSettled(server.api, apiKey, approved.body.id)).status).toBe("confirmed");
    const stillHeld = held.find((id) => id !== approved.body.id);
    expect((await server.api.get(`/v1/transactions/${stillHeld}`, apiKey)).body.status).toBe(
      "pending_approval",
    );
    expect(await solana.getBalance(to, findToken(solana, "USDC"))).toBe(3n * USDC + 1n);
  });

  /**
   * A send of `amount` USDC from the wallet to `to`, its USDC balance read from the node and the answer held
   * back while `meanwhile` runs: what it does falls between the read and the check under the wallet's lock.
   * Returns the send's answer.
   */
  async function sendWithBalanceReadHeld(
    walletId: string,
    to: string,
    amount: string,
    meanwhile: () => Promise<void>,
  ) {
    gate.decide = ({ methods, body }) =>
      methods.includes("getAccountInfo") && body.includes("jsonParsed") ? "hold" : "forward";
    const sending = server.api.post(`/v1/wallets/${walletId}/send`, { to, amount, chain: "solana" }, apiKey);
    await eventually(() => gate.held.length === 1, { describe: "the send's balance read" });
    const read = gate.held.splice(0)[0];
    const answer = (await read?.askNode()) ?? "";
    gate.decide = () => "forward";
    await meanwhile();
    read?.answer(answer);
    return sending;
  }

  /** A send refused for the 3 USDC another send not yet in the balances it read takes. */
  function expectRefusedForOneSendOfThree(refused: Awaited<ReturnType<typeof sendWithBalanceReadHeld>>) {
    expect(refused.status, refused.text).toBe(422);
    expect(expectErrorShape(refused)).toMatchObject({
      reason: "insufficient_token",
      message: expect.stringMatching(/3 is taken by 1 send not yet on chain/),
    });
  }

  it("counts a send landed and confirmed after another's balances were read: the second of two sends of 3 from 5 USDC is refused", async () => {
    const { wallet, to } = await walletAndRecipient("read early", { sol: SOL / 10n, usdc: 5n * USDC });
    try {
      // The first send is recorded pending; its broadcast waits at the gate.
      gate.decide = ({ methods }) => (methods.includes("sendTransaction") ? "hold" : "forward");
      const first = server.api.post(
        `/v1/wallets/${wallet.id}/send`,
        { to, amount: "3", chain: "solana" },
        apiKey,
      );
      await eventually(() => gate.held.length === 1, { describe: "the first send's broadcast" });
      const broadcast = gate.held.splice(0)[0];
      // The second reads its USDC balance (5, the first not yet on chain); meanwhile the first lands, and the
      // confirmer records it confirmed.
      const refused = await sendWithBalanceReadHeld(wallet.id, to, "3", async () => {
        broadcast?.release();
        const sent = await first;
        expect(sent.status, sent.text).toBe(201);
        expect((await waitForSettled(server.api, apiKey, sent.body.id)).status).toBe("confirmed");
      });
      expectRefusedForOneSendOfThree(refused);
      expect(await solana.getBalance(to, findToken(solana, "USDC"))).toBe(3n * USDC + 1n);
    } finally {
      gate.openUp();
    }
  });

  it("counts a send admitted after another's balances were read by an instance whose clock is behind: the second of two sends of 3 from 5 USDC is refused", async () => {
    const { wallet, to } = await walletAndRecipient("clock behind", { sol: SOL / 10n, usdc: 6n * USDC });
    const send = (amount: string) =>
      server.api.post(`/v1/wallets/${wallet.id}/send`, { to, amount, chain: "solana" }, apiKey);
    try {
      // A send of 1, confirmed: the wallet's newest spend when the next one reads its balances (5 USDC).
      const first = await send("1");
      expect(first.status, first.text).toBe(201);
      expect((await waitForSettled(server.api, apiKey, first.body.id)).status).toBe("confirmed");
      const refused = await sendWithBalanceReadHeld(wallet.id, to, "3", async () => {
        // Meanwhile a send of 3 is admitted by an instance whose clock is two minutes behind (this one's, set
        // back): dated before the first, and confirmed.
        server.clock.advance(-120_000);
        let third: Awaited<ReturnType<typeof send>>;
        try {
          third = await send("3");
        } finally {
          server.clock.reset();
        }
        expect(third.status, third.text).toBe(201);
        expect((await waitForSettled(server.api, apiKey, third.body.id)).status).toBe("confirmed");
      });
      expectRefusedForOneSendOfThree(refused);
    } finally {
      gate.openUp();
    }
  });

  it("counts a held send approved after another's balances were read: a send of 2.5 from 5 USDC beside 3 approved meanwhile is refused", async () => {
    const { wallet, to } = await walletAndRecipient(
      "approved meanwhile",
      { sol: SOL / 10n, usdc: 5n * USDC },
      { policy: { approvalAbove: "2.5" } },
    );
    try {
      const held = await server.api.post(
        `/v1/wallets/${wallet.id}/send`,
        { to, amount: "3", chain: "solana" },
        apiKey,
      );
      expect(held.body.status, held.text).toBe("pending_approval");
      const refused = await sendWithBalanceReadHeld(wallet.id, to, "2.5", async () => {
        // Meanwhile the held send is approved, and confirmed.
        const approved = await server.api.post(`/v1/approvals/${held.body.id}/approve`, undefined, apiKey);
        expect(approved.status, approved.text).toBe(200);
        expect((await waitForSettled(server.api, apiKey, held.body.id)).status).toBe("confirmed");
      });
      expectRefusedForOneSendOfThree(refused);
    } finally {
      gate.openUp();
    }
  });

  /**
   * Two sends of 3 from 5 USDC, the second's balances read by a node that has not yet seen the first,
   * confirmed meanwhile (a node lagging behind a load balancer): `afterFirst` runs once the first is
   * confirmed. The second must be refused, and the wallet's history hold one send, confirmed.
   */
  async function secondReadByLaggingNode(
    name: string,
    options: {
      afterFirst?: (walletId: string) => Promise<void>;
      /**
       * The node read the balances on a fork without the first send (its answer labelled at a slot after
       * the first's), and sees the first's block only as processed: its status says so.
       */
      onFork?: boolean;
    } = {},
  ) {
    const { wallet, to } = await walletAndRecipient(name, { sol: SOL / 10n, usdc: 5n * USDC });
    const sendThree = () =>
      server.api.post(`/v1/wallets/${wallet.id}/send`, { to, amount: "3", chain: "solana" }, apiKey);
    const isBalanceRead = ({ methods, body }: { methods: string[]; body: string }) =>
      methods.includes("getAccountInfo") && body.includes("jsonParsed");
    try {
      // The first send's USDC balance read is answered by the node (5); that answer is kept: it is what a
      // node that has not yet seen the first send answers later.
      gate.decide = (call) => (isBalanceRead(call) ? "hold" : "forward");
      const first = sendThree();
      await eventually(() => gate.held.length === 1, { describe: "the first send's balance read" });
      const firstRead = gate.held.splice(0)[0];
      const before = (await firstRead?.askNode()) ?? "";
      firstRead?.answer(before);
      const sent = await first;
      expect(sent.status, sent.text).toBe(201);
      expect((await waitForSettled(server.api, apiKey, sent.body.id)).status).toBe("confirmed");
      await options.afterFirst?.(wallet.id);
      // The second send's balance read is answered as that lagging node does: 5, at a slot before the first
      // landed (its answer's context says which).
      const second = sendThree();
      await eventually(() => gate.held.length === 1, { describe: "the second send's balance read" });
      const secondRead = gate.held.splice(0)[0];
      const id = JSON.stringify((JSON.parse(secondRead?.body ?? "{}") as { id?: unknown }).id);
      gate.decide = ({ methods }) =>
        options.onFork && methods.includes("getSignatureStatuses") ? "hold" : "forward";
      const staleRead = before.replace(/"id":("[^"]*"|\d+)/, `"id":${id}`);
      secondRead?.answer(options.onFork ? staleRead.replace(/"slot":\d+/, `"slot":${2 ** 40}`) : staleRead);
      if (options.onFork) {
        await eventually(() => gate.held.length === 1, { describe: "the second send's status read" });
        const statuses = gate.held.splice(0)[0];
        gate.decide = () => "forward";
        const answer = (await statuses?.askNode()) ?? "";
        expect(answer).toMatch(/"confirmationStatus":"(confirmed|finalized)"/);
        statuses?.answer(answer.replace(/"confirmationStatus":"\w+"/g, `"confirmationStatus":"processed"`));
      }
      expectRefusedForOneSendOfThree(await second);
      const history = (await server.api.get(`/v1/wallets/${wallet.id}/transactions`, apiKey)).body.data as {
        type: string;
        status: string;
      }[];
      expect(history.filter((t) => t.type === "send").map((t) => t.status)).toEqual(["confirmed"]);
    } finally {
      gate.openUp();
    }
  }

  it("counts a send confirmed before another's balances were read when the node that read them had not seen it yet (a node lagging behind a load balancer): the second of two sends of 3 from 5 USDC is refused", async () => {
    await secondReadByLaggingNode("lagging");
  });

  it("counts a send confirmed before another's balances were read when the node that read them holds it only as processed, on another fork: the second of two sends of 3 from 5 USDC is refused", async () => {
    await secondReadByLaggingNode("on a fork", { onFork: true });
  });

  it(`counts it also when more than ${RECENT_SENDS_READ} x402 payments were admitted since (a burst of micropayments)`, async () => {
    await secondReadByLaggingNode("lagging after payments", {
      afterFirst: async (walletId) => {
        // As many payments and one more, admitted after the send and failed since: they count for nothing.
        const db = server.service.store.db;
        for (let i = 0; i <= RECENT_SENDS_READ; i++)
          await db.execute(sql`
          INSERT INTO transactions (id, wallet_id, type, chain, token, amount_atomic, decimals, from_address,
            to_address, status, created_at, admission_seq)
          SELECT ${`tx_micropayment${i}`} || ${walletId}, ${walletId}, 'x402', 'solana', 'USDC', 1, 6,
            solana_address, solana_address, 'failed', now(), nextval('transactions_admission_seq')
          FROM wallets WHERE id = ${walletId}`);
      },
    });
  });

  it("counts no send of a previous chain: confirmed sends an hour old that the chain never saw (a local chain started anew) do not refuse a send of what the wallet holds", async () => {
    const { wallet, to } = await walletAndRecipient("old chain", { sol: SOL / 10n, usdc: 2n * USDC });
    // What the history keeps of the chain before: a send of 3 USDC, confirmed an hour ago.
    const anHourAgo = new Date(Date.now() - 3_600_000).toISOString();
    const signature = getBase58Decoder().decode(randomBytes(64));
    await server.service.store.db.execute(sql`
      INSERT INTO transactions (id, wallet_id, type, chain, token, amount_atomic, decimals, from_address,
        to_address, status, created_at, confirmed_at, tx_hash)
      VALUES ('tx_previouschain' || ${wallet.id}, ${wallet.id}, 'send', 'solana', 'USDC', ${3n * USDC}, 6,
        ${wallet.solana.address}, ${to}, 'confirmed', ${anHourAgo}, ${anHourAgo}, ${signature})`);
    const sent = await server.api.post(
      `/v1/wallets/${wallet.id}/send`,
      { to, amount: "1", chain: "solana" },
      apiKey,
    );
    expect(sent.status, sent.text).toBe(201);
    expect((await waitForSettled(server.api, apiKey, sent.body.id)).status).toBe("confirmed");
  });
});
