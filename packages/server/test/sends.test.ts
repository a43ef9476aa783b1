import { createSolanaRpc, isAddress } from "@solana/kit";
import { fundEvm, fundSolana } from "@svc/devnet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ChainClient } from "../src/chains/types.ts";
import { formatUnits } from "../src/internal/money.ts";
import { devnetClients, solanaKey } from "./support/chains.ts";
import { waitForHistory, waitForSettled } from "./support/spends.ts";
import {
  createTestServer,
  expectErrorShape,
  seedAccount,
  sharedDevnet,
  type TestServer,
} from "./support/test-server.ts";

let server: TestServer;
let apiKey: string;
let chains: { base: ChainClient; solana: ChainClient };
type Devnet = Awaited<ReturnType<typeof sharedDevnet>>;
let devnet: Devnet;

const USDC = 1_000_000n;
const ETH = 10n ** 18n;
const SOL = 1_000_000_000n;

beforeAll(async () => {
  devnet = await sharedDevnet();
  server = await createTestServer();
  ({ apiKey } = await seedAccount(server.api));
  chains = await devnetClients(devnet);
});
afterAll(() => server.close());

async function createWallet(policy?: Record<string, unknown>) {
  const response = await server.api.post(
    "/v1/wallets",
    { name: "sender", chains: ["base", "solana"], ...(policy ? { policy } : {}) },
    apiKey,
  );
  if (response.status !== 201) throw new Error(response.text);
  return response.body as { id: string; evm: { address: `0x${string}` }; solana: { address: string } };
}

async function fundedWallet(policy?: Record<string, unknown>) {
  const wallet = await createWallet(policy);
  await fundEvm(devnet, wallet.evm.address, { eth: ETH, usdc: 500n * USDC });
  await fundSolana(devnet, wallet.solana.address as never, { sol: 2n * SOL, usdc: 500n * USDC });
  return wallet;
}

const usdcOf = (chain: ChainClient) =>
  chain.config.tokens.find((t) => t.symbol === "USDC") ?? chain.config.nativeToken;

describe("POST /v1/wallets/:id/send", () => {
  it.each([
    ["base", "USDC"],
    ["base", "ETH"],
    ["solana", "USDC"],
    ["solana", "SOL"],
  ] as const)(
    "sends %s %s: balances move by exactly the amount, send confirmed, the recipient wallet has the receive",
    async (chainName, symbol) => {
      const sender = await fundedWallet();
      const recipient = await createWallet();
      const chain = chains[chainName];
      const token = symbol === "USDC" ? usdcOf(chain) : chain.config.nativeToken;
      const native = chain.config.nativeToken;
      const from = chainName === "base" ? sender.evm.address : sender.solana.address;
      const to = chainName === "base" ? recipient.evm.address : recipient.solana.address;
      const amount = symbol === "USDC" ? "12.345678" : "0.25";
      const atomic = symbol === "USDC" ? 12_345_678n : chainName === "base" ? ETH / 4n : SOL / 4n;

      const before = {
        sender: await chain.getBalance(from, token),
        senderNative: await chain.getBalance(from, native),
        recipient: await chain.getBalance(to, token),
      };
      const response = await server.api.post(
        `/v1/wallets/${sender.id}/send`,
        { to, amount, token: symbol, chain: chainName },
        apiKey,
      );
      expect(response.status, response.text).toBe(201);
      expect(response.body).toMatchObject({
        type: "send",
        status: "pending",
        amount,
        token: symbol,
        chain: chainName,
        from,
        to,
        walletId: sender.id,
      });
      expect(response.body.txHash).toBeTruthy();

      const settled = await waitForSettled(server.api, apiKey, response.body.id);
      expect(settled.status).toBe("confirmed");
      expect(settled.confirmedAt).toBeTruthy();
      expect(await chain.getBalance(to, token)).toBe(before.recipient + atomic);
      // The record states what the send cost beyond its amount, to the unit: the history accounts for it.
      const fee =
        before.senderNative - (await chain.getBalance(from, native)) - (token === native ? atomic : 0n);
      expect(settled.fee).toEqual({ amount: formatUnits(fee, native.decimals), token: native.symbol });
      if (token.address === null) {
        expect(fee).toBeGreaterThan(0n);
        expect(fee).toBeLessThan(chainName === "base" ? ETH / 100n : SOL / 100n);
      } else {
        expect(await chain.getBalance(from, token)).toBe(before.sender - atomic);
        // The fee, in the native coin; on Solana with the rent of the token account the send opened.
        expect(fee).toBeGreaterThan(0n);
      }
      const receives = await waitForHistory(server.api, apiKey, recipient.id, (rows) =>
        rows.some((r) => r.txHash === response.body.txHash),
      );
      expect(receives.filter((r) => r.txHash === response.body.txHash)).toEqual([
        expect.objectContaining({
          type: "receive",
          status: "confirmed",
          amount,
          token: symbol,
          chain: chainName,
          from,
          to,
        }),
      ]);
    },
  );
});

describe("refused sends move nothing and record nothing", () => {
  const DEAD = "0x000000000000000000000000000000000000dEaD";

  async function expectRefused(
    walletId: string,
    body: Record<string, unknown>,
    status: number,
    code: string,
    reason: string,
  ) {
    // Sends only: the watcher may still be recording the funding transfers as receives.
    const sends = `/v1/wallets/${walletId}/transactions?type=send`;
    const historyBefore = (await server.api.get(sends, apiKey)).body.total;
    const response = await server.api.post(`/v1/wallets/${walletId}/send`, body, apiKey);
    expect(response.status, response.text).toBe(status);
    const error = expectErrorShape(response);
    expect(error).toMatchObject({ code, reason });
    expect((await server.api.get(sends, apiKey)).body.total).toBe(historyBefore);
    return error;
  }

  it("refuses each case with its documented error", async () => {
    const wallet = await fundedWallet({
      maxPerTx: "10",
      whitelist: [DEAD, "11111111111111111111111111111112"],
    });
    const usdcBefore = await chains.base.getBalance(wallet.evm.address, usdcOf(chains.base));

    const overMax = await expectRefused(
      wallet.id,
      { to: DEAD, amount: "10.01", chain: "base" },
      403,
      "PolicyViolation",
      "max_per_tx",
    );
    expect(overMax.message).toBe("Per-transaction limit of $10.00 exceeded: this spend is $10.01");
    expect(overMax.details).toMatchObject({ rule: "maxPerTx", limit: "10.00", requested: "10.01" });
    await expectRefused(
      wallet.id,
      { to: "0x0000000000000000000000000000000000000b0b", amount: "1", chain: "base" },
      403,
      "PolicyViolation",
      "recipient_not_allowed",
    );
    // Each amount refused says what is wrong with it (before, one sentence for all of them).
    for (const [amount, message] of [
      ["1.0000001", "Amount has 7 decimals: USDC has 6"],
      ["0", "Amount must be more than 0"],
      ["-1", "Amount must be positive"],
      ["1,5", "Amount takes a dot before its decimals (1.5), not a comma"],
      [" 1", "Amount must have no spaces around it"],
      ["1e3", "Amount must be written in digits (1000), not with an exponent"],
      ["01.5", "Amount must not start with 0 (write 1.5, or 0.5)"],
      [".5", "Amount needs a digit before its dot (0.5)"],
      ["abc", "Amount must be a decimal number such as 1.5"],
      [`1${"0".repeat(80)}`.slice(0, 78), "Amount is more than a transfer of USDC can carry"],
    ]) {
      const refused = await expectRefused(
        wallet.id,
        { to: DEAD, amount, chain: "base" },
        400,
        "ValidationError",
        "invalid_amount",
      );
      expect(refused.message, amount).toBe(message);
    }
    // Before: "Invalid body: amount: Invalid input".
    for (const [amount, message] of [
      [undefined, 'Invalid body: amount: required: a decimal string such as "2.5"'],
      [null, 'Invalid body: amount: expected a decimal string such as "2.5"'],
    ]) {
      const refused = await server.api.post(
        `/v1/wallets/${wallet.id}/send`,
        { to: DEAD, amount, chain: "base" },
        apiKey,
      );
      expect(refused.status, refused.text).toBe(400);
      expect(expectErrorShape(refused).message).toBe(message);
    }
    await expectRefused(
      wallet.id,
      { to: "0x123", amount: "1", chain: "base" },
      400,
      "ValidationError",
      "invalid_address",
    );
    // DEAD with one letter's case changed: before, the same words as for "0x123".
    const badChecksum = await expectRefused(
      wallet.id,
      { to: DEAD.replace("dEaD", "deaD"), amount: "1", chain: "base" },
      400,
      "ValidationError",
      "invalid_address",
    );
    expect(badChecksum.message).toBe(
      "Invalid recipient address for base: its mixed-case checksum (EIP-55) does not match: a character may be mistyped",
    );
    // A Solana address on an EVM chain, and an EVM address on Solana.
    await expectRefused(
      wallet.id,
      { to: wallet.solana.address, amount: "1", chain: "base" },
      400,
      "ValidationError",
      "invalid_address",
    );
    await expectRefused(
      wallet.id,
      { to: DEAD, amount: "1", chain: "solana" },
      400,
      "ValidationError",
      "invalid_address",
    );
    await expectRefused(
      wallet.id,
      { to: DEAD, amount: "1", chain: "base", token: "DOGE" },
      400,
      "ValidationError",
      "unknown_token",
    );

    expect((await server.api.post(`/v1/wallets/${wallet.id}/policy/pause`, undefined, apiKey)).status).toBe(
      200,
    );
    await expectRefused(
      wallet.id,
      { to: DEAD, amount: "1", chain: "base" },
      403,
      "PolicyViolation",
      "policy_paused",
    );
    await server.api.post(`/v1/wallets/${wallet.id}/policy/resume`, undefined, apiKey);

    await expectRefused(
      wallet.id,
      { to: DEAD, amount: "9", chain: "base", token: "ETH" },
      403,
      "PolicyViolation",
      "max_per_tx",
    );
    expect(await chains.base.getBalance(wallet.evm.address, usdcOf(chains.base))).toBe(usdcBefore);
  });

  it("refuses a send beyond the balance, and one without gas for the fee, with 422 InsufficientFunds", async () => {
    const wallet = await createWallet();
    await fundEvm(devnet, wallet.evm.address, { usdc: 5n * USDC });
    const noGas = await expectRefused(
      wallet.id,
      { to: DEAD, amount: "1", chain: "base" },
      422,
      "InsufficientFunds",
      "insufficient_gas",
    );
    expect(noGas.message).toMatch(/^Insufficient ETH for fees/);
    await fundEvm(devnet, wallet.evm.address, { eth: ETH / 10n });
    const tooMuch = await expectRefused(
      wallet.id,
      { to: DEAD, amount: "5.000001", chain: "base" },
      422,
      "InsufficientFunds",
      "insufficient_token",
    );
    expect(tooMuch.message).toBe("Insufficient USDC: balance 5, this send needs 5.000001");
    await fundSolana(devnet, wallet.solana.address as never, { usdc: 5n * USDC });
    await expectRefused(
      wallet.id,
      { to: "11111111111111111111111111111112", amount: "1", chain: "solana" },
      422,
      "InsufficientFunds",
      "insufficient_gas",
    );
    expect(await chains.base.getBalance(wallet.evm.address, usdcOf(chains.base))).toBe(5n * USDC);
  });

  it("refuses SOL that would leave the recipient or the sender below an account's rent exemption, with 400", async () => {
    const rent = await devnetRentExemption();
    const wallet = await createWallet();
    await fundSolana(devnet, wallet.solana.address as never, { sol: SOL });
    // A new account given less than its rent exemption: the chain would refuse it.
    const dust = await expectRefused(
      wallet.id,
      { to: (await solanaKey()).address, amount: "0.000000001", token: "SOL", chain: "solana" },
      400,
      "ValidationError",
      "below_rent_minimum",
    );
    expect(dust.details).toEqual({
      chain: "solana",
      account: "recipient",
      token: "SOL",
      minimum: formatUnits(rent, 9),
      resulting: "0.000000001",
    });
    // The wallet left with less than its own exemption after the 0.000005 SOL fee.
    const left = rent - 1n;
    const drained = await expectRefused(
      wallet.id,
      {
        to: (await solanaKey()).address,
        amount: formatUnits(SOL - 5_000n - left, 9),
        token: "SOL",
        chain: "solana",
      },
      400,
      "ValidationError",
      "below_rent_minimum",
    );
    expect(drained.details).toMatchObject({ account: "sender", resulting: formatUnits(left, 9) });
    // Exactly the exemption to a new account goes through and lands.
    const to = (await solanaKey()).address;
    const sent = await server.api.post(
      `/v1/wallets/${wallet.id}/send`,
      { to, amount: formatUnits(rent, 9), token: "SOL", chain: "solana" },
      apiKey,
    );
    expect(sent.status, sent.text).toBe(201);
    expect((await waitForSettled(server.api, apiKey, sent.body.id)).status).toBe("confirmed");
    expect(await chains.solana.getBalance(to, chains.solana.config.nativeToken)).toBe(rent);
    // And so does everything but the fee, leaving the wallet nothing.
    const rest = SOL - rent - 2n * 5_000n;
    const emptied = await server.api.post(
      `/v1/wallets/${wallet.id}/send`,
      { to: (await solanaKey()).address, amount: formatUnits(rest, 9), token: "SOL", chain: "solana" },
      apiKey,
    );
    expect(emptied.status, emptied.text).toBe(201);
    expect((await waitForSettled(server.api, apiKey, emptied.body.id)).status).toBe("confirmed");
    expect(await chains.solana.getBalance(wallet.solana.address, chains.solana.config.nativeToken)).toBe(0n);
  });

  it("refuses a Solana transfer whose fee alone leaves the wallet below its rent exemption, with 400", async () => {
    const rent = await devnetRentExemption();
    // The chain checks the paying account once the fee is taken, before the transfer runs: a wallet holding
    // just above the exemption cannot send even everything but the fee, nor to itself.
    const poor = await createWallet();
    await fundSolana(devnet, poor.solana.address as never, { sol: rent + 100n, usdc: USDC });
    // The recipients hold enough already: only the paying side is short.
    const funded = (await solanaKey()).address;
    await fundSolana(devnet, funded, { sol: SOL });
    for (const to of [funded, poor.solana.address]) {
      const refused = await expectRefused(
        poor.id,
        { to, amount: formatUnits(rent + 100n - 5_000n, 9), token: "SOL", chain: "solana" },
        400,
        "ValidationError",
        "below_rent_minimum",
      );
      expect(refused.details).toMatchObject({
        account: "sender",
        resulting: formatUnits(rent + 100n - 5_000n, 9),
      });
    }
    // A USDC transfer to a new address pays the rent of the recipient's token account besides the fee: here
    // that leaves the wallet more than nothing but less than its exemption.
    const tokenAccountRent = await createSolanaRpc(devnet.solana.rpcUrl)
      .getMinimumBalanceForRentExemption(165n)
      .send();
    const payer = await createWallet();
    const sol = 5_000n + tokenAccountRent + rent / 2n;
    await fundSolana(devnet, payer.solana.address as never, { sol, usdc: USDC });
    const refused = await expectRefused(
      payer.id,
      { to: (await solanaKey()).address, amount: "0.5", token: "USDC", chain: "solana" },
      400,
      "ValidationError",
      "below_rent_minimum",
    );
    expect(refused.details).toMatchObject({ account: "sender", resulting: formatUnits(rent / 2n, 9) });
    expect(await chains.solana.getBalance(payer.solana.address, usdcOf(chains.solana))).toBe(USDC);
  });

  it("refuses amounts no chain can carry and JSON numbers that are not exact, with 400", async () => {
    const wallet = await fundedWallet();
    await expectRefused(
      wallet.id,
      { to: DEAD, amount: `2${"0".repeat(72)}`, chain: "base" },
      400,
      "ValidationError",
      "invalid_amount",
    );
    await expectRefused(
      wallet.id,
      { to: wallet.solana.address, amount: `2${"0".repeat(20)}`, chain: "solana" },
      400,
      "ValidationError",
      "invalid_amount",
    );
    await expectRefused(
      wallet.id,
      { to: DEAD, amount: 1e-7, chain: "base", token: "ETH" },
      400,
      "ValidationError",
      "invalid_body",
    );
    await expectRefused(
      wallet.id,
      { to: DEAD, amount: 2 ** 60, chain: "base", token: "ETH" },
      400,
      "ValidationError",
      "invalid_body",
    );
    const huge = await server.api.request("PATCH", `/v1/wallets/${wallet.id}/policy`, {
      token: apiKey,
      body: { dailyLimit: `1${"0".repeat(40)}` },
    });
    expect(huge.status).toBe(400);
  });

  it("checks the daily limit before funds: an over-limit send from an empty wallet is a PolicyViolation", async () => {
    const wallet = await createWallet({ dailyLimit: "5" });
    await expectRefused(
      wallet.id,
      { to: DEAD, amount: "6", chain: "base" },
      403,
      "PolicyViolation",
      "daily_limit",
    );
  });

  it("matches Solana whitelist entries exactly (base58 is case-sensitive)", async () => {
    const recipient = await createWallet();
    const address: string = recipient.solana.address;
    // Another valid address that differs from the recipient's only in the case of one letter.
    const otherCase = Array.from(address, (_, i) => {
      const flipped =
        address[i] === address[i]?.toUpperCase() ? address[i]?.toLowerCase() : address[i]?.toUpperCase();
      return `${address.slice(0, i)}${flipped}${address.slice(i + 1)}`;
    }).find((candidate) => candidate !== address && isAddress(candidate));
    if (!otherCase) throw new Error(`no valid case variant of ${address}`);
    const wallet = await fundedWallet({ whitelist: [otherCase] });
    await expectRefused(
      wallet.id,
      { to: recipient.solana.address, amount: "1", chain: "solana" },
      403,
      "PolicyViolation",
      "recipient_not_allowed",
    );
  });

  it("refuses a send from an archived wallet with 409 wallet_archived", async () => {
    const wallet = await fundedWallet();
    await server.api.delete(`/v1/wallets/${wallet.id}`, apiKey);
    await expectRefused(
      wallet.id,
      { to: DEAD, amount: "1", chain: "base" },
      409,
      "ValidationError",
      "wallet_archived",
    );
  });
});

/** What the devnet's cluster asks an account holding no data to keep (its rent exemption), in lamports. */
async function devnetRentExemption(): Promise<bigint> {
  return createSolanaRpc(devnet.solana.rpcUrl).getMinimumBalanceForRentExemption(0n).send();
}
