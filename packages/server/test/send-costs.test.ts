/**
 * What a send costs its wallet beyond the amount, against the policy: on Solana, the rent of a token account
 * the send opens for its recipient, which the recipient can close and take (counted as given, as the amount
 * is); on EVM, the gas a recipient's code takes to receive the native coin (paid as fees, which no limit
 * counts, so bounded per send).
 */
import { createSolanaRpc } from "@solana/kit";
import { fundEvm, fundSolana } from "@svc/devnet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ChainClient } from "../src/chains/types.ts";
import { formatUnits, formatUsd } from "../src/internal/money.ts";
import { findToken, MAX_NATIVE_SEND_GAS } from "../src/spends/transfer.ts";
import {
  closeTokenAccount,
  devnetClients,
  evmKey,
  solanaKey,
  tokenAccountRentUsd,
} from "./support/chains.ts";
import { eventually } from "./support/eventually.ts";
import { RpcGate } from "./support/rpc-gate.ts";
import { waitForSettled } from "./support/spends.ts";
import { createTestServer, seedAccount, sharedDevnet, type TestServer } from "./support/test-server.ts";

let server: TestServer;
let apiKey: string;
let chains: { base: ChainClient; solana: ChainClient };
let devnet: Awaited<ReturnType<typeof sharedDevnet>>;
/** The rent of a token account, in USD micros at the devnet's SOL price. */
let rentUsdMicros: bigint;

const USDC = 1_000_000n;
const SOL = 1_000_000_000n;
const ETH = 10n ** 18n;

beforeAll(async () => {
  devnet = await sharedDevnet();
  server = await createTestServer();
  ({ apiKey } = await seedAccount(server.api));
  chains = await devnetClients(devnet);
  rentUsdMicros = await tokenAccountRentUsd(devnet, chains.solana.config.nativeToken);
});
afterAll(() => server.close());

async function wallet(policy: Record<string, unknown>) {
  const created = await server.api.post(
    "/v1/wallets",
    { name: "costs", chains: ["base", "solana"], policy },
    apiKey,
  );
  if (created.status !== 201) throw new Error(created.text);
  const body = created.body as { id: string; evm: { address: `0x${string}` }; solana: { address: string } };
  await fundSolana(devnet, body.solana.address as never, { sol: 2n * SOL, usdc: 100n * USDC });
  await fundEvm(devnet, body.evm.address, { eth: ETH });
  return body;
}

const sendUsdc = (walletId: string, to: string, amount: string) =>
  server.api.post(`/v1/wallets/${walletId}/send`, { to, amount, token: "USDC", chain: "solana" }, apiKey);

/** A Solana address whose USDC token account already exists. */
async function recipientWithTokenAccount(): Promise<string> {
  const { address } = await solanaKey();
  await fundSolana(devnet, address, { usdc: 1n });
  return address;
}

describe("a Solana send that opens its recipient's token account", () => {
  it("counts the account's rent against maxPerTx: a dust send to a fresh address is refused, nothing moves", async () => {
    const payer = await wallet({ maxPerTx: "0.10" });
    const solBefore = await chains.solana.getBalance(payer.solana.address, chains.solana.config.nativeToken);
    const fresh = (await solanaKey()).address;

    const refused = await sendUsdc(payer.id, fresh, "0.000001");
    expect(refused.status).toBe(403);
    expect(refused.body.error.reason).toBe("max_per_tx");
    const total = formatUsd(rentUsdMicros + 1n);
    expect(refused.body.error.message).toBe(
      `Per-transaction limit of $0.10 exceeded: this spend is $${total}, of which $${formatUsd(rentUsdMicros)} is the rent of the recipient's new token account`,
    );
    expect(refused.body.error.details).toEqual({
      rule: "maxPerTx",
      limit: "0.10",
      requested: total,
      recipientAccountRent: formatUsd(rentUsdMicros),
    });
    expect(await chains.solana.getBalance(payer.solana.address, chains.solana.config.nativeToken)).toBe(
      solBefore,
    );
    const history = await server.api.get(`/v1/wallets/${payer.id}/transactions?type=send`, apiKey);
    expect(history.body.data).toEqual([]);

    // A recipient whose account exists is given the amount alone.
    const sent = await sendUsdc(payer.id, await recipientWithTokenAccount(), "0.05");
    expect(sent.status).toBe(201);
  });

  it("counts the rent in the daily limit and the spending view", async () => {
    const payer = await wallet({ dailyLimit: "0.50" });
    const first = await sendUsdc(payer.id, (await solanaKey()).address, "0.01");
    expect(first.status).toBe(201);
    const spending = await server.api.get(`/v1/wallets/${payer.id}/spending`, apiKey);
    expect(spending.body.used).toBe(formatUsd(10_000n + rentUsdMicros));

    const second = await sendUsdc(payer.id, (await solanaKey()).address, "0.01");
    expect(second.status).toBe(403);
    expect(second.body.error.reason).toBe("daily_limit");
    expect(second.body.error.details.recipientAccountRent).toBe(formatUsd(rentUsdMicros));
    // The same amount to a recipient with an account fits.
    expect((await sendUsdc(payer.id, await recipientWithTokenAccount(), "0.01")).status).toBe(201);
  });

  it("counts a held spend as it is sent when approved: its rent gone once the recipient opened its account", async () => {
    const payer = await wallet({ approvalAbove: "0.20", dailyLimit: "5" });
    const { address: recipient } = await solanaKey();
    const held = await sendUsdc(payer.id, recipient, "0.01");
    expect(held.status).toBe(202);
    expect(held.body.status).toBe("pending_approval");
    const whileHeld = await server.api.get(`/v1/wallets/${payer.id}/spending`, apiKey);
    expect(whileHeld.body.used).toBe(formatUsd(10_000n + rentUsdMicros));

    await fundSolana(devnet, recipient, { usdc: 1n });
    const approved = await server.api.post(`/v1/approvals/${held.body.id}/approve`, undefined, apiKey);
    expect(approved.status).toBe(200);
    await waitForSettled(server.api, apiKey, held.body.id);
    const after = await server.api.get(`/v1/wallets/${payer.id}/spending`, apiKey);
    expect(after.body.used).toBe("0.01");
    expect(await chains.solana.getBalance(recipient, findToken(chains.solana, "USDC"))).toBe(1n + 10_000n);
  });
});

describe("a Solana send to a recipient that closes its token account after the plan found it open", () => {
  let gate: RpcGate;
  let gated: TestServer;
  beforeAll(async () => {
    gate = await RpcGate.start(devnet.solana.rpcUrl);
    gated = await createTestServer({
      devnet: { ...devnet, solana: { ...devnet.solana, rpcUrl: gate.url } },
    });
  });
  afterAll(async () => {
    await gated.close();
    await gate.close();
  });

  it("does not open it again: the transfer fails, and the wallet pays no rent the policy did not count", async () => {
    const { apiKey: key } = await seedAccount(gated.api);
    const payer = (
      await gated.api.post(
        "/v1/wallets",
        { name: "closing", chains: ["solana"], policy: { maxPerTx: "0.10" } },
        key,
      )
    ).body as { id: string; solana: { address: string } };
    await fundSolana(devnet, payer.solana.address as never, { sol: SOL, usdc: USDC });
    const recipient = await solanaKey();
    await fundSolana(devnet, recipient.address, { sol: SOL / 10n, usdc: 1n });
    const usdc = findToken(chains.solana, "USDC");
    const solBefore = await chains.solana.getBalance(payer.solana.address, chains.solana.config.nativeToken);

    // Planned with the account open (no rent counted); held on its way to the node while the owner closes it.
    gate.decide = ({ methods }) => (methods.includes("sendTransaction") ? "hold" : "forward");
    const sending = gated.api.post(
      `/v1/wallets/${payer.id}/send`,
      { to: recipient.address, amount: "0.000001", token: "USDC", chain: "solana" },
      key,
    );
    await eventually(() => gate.held.length > 0, { describe: "the send's broadcast to reach the gate" });
    const account = await closeTokenAccount(devnet, recipient, usdc);
    gate.openUp();

    const answered = await sending;
    const ended =
      answered.status === 201
        ? await waitForSettled(gated.api, key, answered.body.id)
        : (await gated.api.get(`/v1/wallets/${payer.id}/transactions?type=send`, key)).body.data[0];
    expect(ended.status).toBe("failed");
    // At most the fee of a transfer that landed and failed; no account's rent.
    const spent =
      solBefore - (await chains.solana.getBalance(payer.solana.address, chains.solana.config.nativeToken));
    expect(spent).toBeLessThanOrEqual(5_000n);
    // A transfer that landed and failed states the fee it paid; one the node refused states none.
    expect(ended.fee?.amount ?? "0").toBe(formatUnits(spent, 9));
    expect(await createSolanaRpc(devnet.solana.rpcUrl).getAccountInfo(account).send()).toMatchObject({
      value: null,
    });
  });
});

describe("an EVM send of the native coin to a contract", () => {
  async function contractAt(runtime: `0x${string}`): Promise<`0x${string}`> {
    const { address } = evmKey();
    const answer = await fetch(devnet.evm.rpcUrl, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "anvil_setCode", params: [address, runtime] }),
    });
    if (!answer.ok) throw new Error(await answer.text());
    return address;
  }

  it("is refused when the contract would take more gas to receive it than a send may: nothing signed or recorded", async () => {
    const payer = await wallet({ maxPerTx: "0.01", dailyLimit: "0.01" });
    // PUSH3 200,000; loop: PUSH1 1, SWAP1, SUB, DUP1, PUSH1 4, JUMPI; STOP (counts down, some 5 million gas).
    const burner = await contractAt("0x62030d405b600190038060045700");
    const ethBefore = await chains.base.getBalance(payer.evm.address, chains.base.config.nativeToken);

    const refused = await server.api.post(
      `/v1/wallets/${payer.id}/send`,
      { to: burner, amount: "0.000000000000000001", token: "ETH", chain: "base" },
      apiKey,
    );
    expect(refused.status).toBe(400);
    expect(refused.body.error.reason).toBe("recipient_too_costly");
    expect(refused.body.error.message).toMatch(
      new RegExp(
        `^Refusing to send ETH to ${burner} on base: its code would take up to [\\d,]+ gas to receive it`,
      ),
    );
    expect(BigInt(refused.body.error.details.gas)).toBeGreaterThan(MAX_NATIVE_SEND_GAS);
    expect(refused.body.error.details.maxGas).toBe(MAX_NATIVE_SEND_GAS.toString());
    expect(await chains.base.getBalance(payer.evm.address, chains.base.config.nativeToken)).toBe(ethBefore);
    expect(
      (await server.api.get(`/v1/wallets/${payer.id}/transactions?type=send`, apiKey)).body.data,
    ).toEqual([]);
  });

  it("is sent when the contract takes what a smart account's receive does", async () => {
    const payer = await wallet({ maxPerTx: "0.01" });
    // STOP: receiving costs nothing beyond the plain transfer.
    const account = await contractAt("0x00");
    const sent = await server.api.post(
      `/v1/wallets/${payer.id}/send`,
      { to: account, amount: "0.000001", token: "ETH", chain: "base" },
      apiKey,
    );
    expect(sent.status).toBe(201);
    const settled = await waitForSettled(server.api, apiKey, sent.body.id);
    expect(settled.status).toBe("confirmed");
    expect(await chains.base.getBalance(account, chains.base.config.nativeToken)).toBe(10n ** 12n);
  });
});
