import { createSolanaRpc } from "@solana/kit";
import { TOKEN_PROGRAM_ADDRESS } from "@solana-program/token";
import { type Devnet, fundSolana, startDevnet } from "@svc/devnet";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { devnetClients, signedTransfer, solanaKey } from "../../test/support/chains.ts";
import { eventually } from "../../test/support/eventually.ts";
import { startRpcProxy } from "../../test/support/rpc-proxy.ts";
import { BlockhashNotFoundError, ChainRequestError, TransactionRejectedError } from "./errors.ts";
import { SOLANA_NODE_LAG, SolanaChain, TOKEN_2022_PROGRAM_ADDRESS, tokenProgramAccount } from "./solana.ts";
import type { ChainClient, SignedTransfer, TokenInfo, TransferStatus } from "./types.ts";

let devnet: Devnet;
let solana: ChainClient;
let usdc: TokenInfo;
let sol: TokenInfo;

beforeAll(async () => {
  devnet = await startDevnet();
  ({ solana } = await devnetClients(devnet));
  sol = solana.config.nativeToken;
  usdc = solana.config.tokens[0] as TokenInfo;
});
afterAll(() => devnet.stop());

async function fundedSender() {
  const sender = await solanaKey();
  await fundSolana(devnet, sender.address, { sol: 2_000_000_000n, usdc: 50_000_000n });
  return sender;
}

/** Asks for the status until it leaves `pending` (slots pass every 100 ms on the devnet). */
function settled(signed: SignedTransfer, from: string): Promise<TransferStatus> {
  return eventually(
    async () => {
      const status = await solana.getTransferStatus(signed, from);
      return status.state === "pending" ? undefined : status;
    },
    { describe: `transfer ${signed.txHash} to leave pending` },
  );
}

describe("SolanaChain on the local cluster", () => {
  it("describes the local cluster by its genesis hash, with SOL and the devnet USDC mint", async () => {
    const genesis = await createSolanaRpc(devnet.solana.rpcUrl).getGenesisHash().send();
    expect(solana.config).toMatchObject({
      name: "solana",
      kind: "solana",
      network: `solana:${genesis.slice(0, 32)}`,
      testnet: true,
    });
    expect(solana.config.network).not.toBe("solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp");
    expect(sol).toMatchObject({ symbol: "SOL", address: null, decimals: 9 });
    expect(usdc).toMatchObject({
      symbol: "USDC",
      address: devnet.solana.usdcMint,
      decimals: 6,
      usdPrice: "1",
    });
    expect(solana.isValidAddress(devnet.treasury.solana.address)).toBe(true);
    expect(solana.isValidAddress("0x70997970C51812dc3A010C7d01b50e0d17dc79C8")).toBe(false);
  });

  it("sends USDC with TransferChecked, creating the recipient's token account, pending until it lands", async () => {
    const sender = await fundedSender();
    const recipient = (await solanaKey()).address;
    const { fee } = await solana.planTransfer({
      from: sender.address,
      to: recipient,
      token: usdc,
      amount: 1_500_000n,
    });
    // The base fee plus the rent of the recipient's new token account.
    expect(fee).toBeGreaterThan(5_000n);
    const signed = await signedTransfer(solana, {
      privateKey: sender.privateKey,
      to: recipient,
      token: usdc,
      amount: 1_500_000n,
    });
    expect(signed.lastValidBlockHeight).toBeTypeOf("bigint");
    expect(await solana.getTransferStatus(signed, sender.address)).toEqual({ state: "pending" });
    const solBefore = await solana.getBalance(sender.address, sol);
    await solana.broadcast(signed);
    const status = await settled(signed, sender.address);
    expect(status.state).toBe("confirmed");
    await solana.broadcast(signed); // already landed: harmless
    expect(await solana.getBalance(recipient, usdc)).toBe(1_500_000n);
    expect(await solana.getBalance(sender.address, usdc)).toBe(48_500_000n);
    expect(solBefore - (await solana.getBalance(sender.address, sol))).toBe(fee);
    // The account exists now: the next transfer costs only the base fee.
    const next = await solana.planTransfer({ from: sender.address, to: recipient, token: usdc, amount: 1n });
    expect(next.fee).toBe(5_000n);
  });

  it("sends SOL and confirms it", async () => {
    const sender = await fundedSender();
    const recipient = (await solanaKey()).address;
    const signed = await signedTransfer(solana, {
      privateKey: sender.privateKey,
      to: recipient,
      token: sol,
      amount: 1_000_000_000n,
    });
    await solana.broadcast(signed);
    expect((await settled(signed, sender.address)).state).toBe("confirmed");
    expect(await solana.getBalance(recipient, sol)).toBe(1_000_000_000n);
  });

  it("makes two identical transfers in a row distinct transactions", async () => {
    const sender = await fundedSender();
    const recipient = (await solanaKey()).address;
    const input = { privateKey: sender.privateKey, to: recipient, token: usdc, amount: 1n };
    const [a, b] = await Promise.all([signedTransfer(solana, input), signedTransfer(solana, input)]);
    expect(a?.txHash).not.toBe(b?.txHash);
  });

  it("reports dropped when the blockhash expired before the transfer landed, and refuses to broadcast it", async () => {
    const sender = await fundedSender();
    const signed = await signedTransfer(solana, {
      privateKey: sender.privateKey,
      to: (await solanaKey()).address,
      token: sol,
      amount: 1n,
    });
    devnet.advanceSolanaSlots(200);
    expect(await solana.getTransferStatus(signed, sender.address)).toEqual({
      state: "dropped",
      reason: "blockhash expired before the transaction landed",
    });
    await expect(solana.broadcast(signed)).rejects.toBeInstanceOf(BlockhashNotFoundError);
  });

  /**
   * A FAKE of what the machine cannot reach: the devnet behind a load balancer whose node answering statuses
   * is at `slot` and has not seen the transfer; every other call reaches the devnet.
   */
  async function statusesAnsweredAt(slot: number): Promise<SolanaChain> {
    const balancer = await startRpcProxy(devnet.solana.rpcUrl, (method) =>
      method === "getSignatureStatuses"
        ? {
            status: 200,
            body: JSON.stringify({ jsonrpc: "2.0", id: 1, result: { context: { slot }, value: [null] } }),
          }
        : "forward",
    );
    onTestFinished(() => balancer.close());
    return new SolanaChain({ ...solana.config, rpcUrl: balancer.url });
  }

  /** A USDC transfer of a funded sender, signed and not sent. */
  async function unsentTransfer() {
    const sender = await fundedSender();
    const to = (await solanaKey()).address;
    const signed = await signedTransfer(solana, {
      privateKey: sender.privateKey,
      to,
      token: usdc,
      amount: 1n,
    });
    return { sender, signed };
  }

  it("does not take a status answer from a node behind for dropped: a load balancer's other node, which has not seen the transfer (it was re-signed and paid twice)", async () => {
    const { sender, signed } = await unsentTransfer();
    await solana.broadcast(signed);
    expect((await settled(signed, sender.address)).state).toBe("confirmed");
    devnet.advanceSolanaSlots(200);
    const balanced = await statusesAnsweredAt(1);
    expect(await balanced.getTransferStatus(signed, sender.address)).toEqual({ state: "pending" });
  });

  it("takes a status answered without a slot (some history tiers say 0) for dropped once the chain is 150 blocks further", async () => {
    const { sender, signed } = await unsentTransfer();
    const balanced = await statusesAnsweredAt(0);
    // Never sent: past its last valid height it is dropped, but only a node that has seen that far says so.
    devnet.advanceSolanaSlots(200);
    expect(await balanced.getTransferStatus(signed, sender.address)).toEqual({ state: "pending" });
    // It stayed pending for good, its amount held in the daily limit.
    devnet.advanceSolanaSlots(200);
    expect(await balanced.getTransferStatus(signed, sender.address)).toEqual({
      state: "dropped",
      reason: "blockhash expired before the transaction landed",
    });
  });

  it("reports failed for a transfer that fails in execution", async () => {
    const sender = await fundedSender();
    const signed = await signedTransfer(solana, {
      privateKey: sender.privateKey,
      to: (await solanaKey()).address,
      token: usdc,
      amount: 10n ** 12n,
    });
    // Preflight refuses it; landing it needs a node that skips preflight, so only the rejection is seen here.
    const rejection = await solana.broadcast(signed).catch((error: unknown) => error);
    expect(rejection).toBeInstanceOf(TransactionRejectedError);
    expect((rejection as TransactionRejectedError).facts.reason).toBe(
      "Transaction simulation failed: Error processing Instruction 2: custom program error: 0x1",
    );
  });

  it("scans incoming SOL and USDC transfers to watched owners once, with stable indexes", async () => {
    const watched = (await solanaKey()).address;
    const start = await solana.scanIncoming(async () => [watched], null);
    expect(start.transfers).toEqual([]);
    const funded = await fundSolana(devnet, watched, { sol: 3_000_000n, usdc: 4_000_000n });
    await fundSolana(devnet, (await solanaKey()).address, { usdc: 1n });
    devnet.advanceSolanaSlots(2);
    const scan = await solana.scanIncoming(async () => [watched], start.cursor);
    const summary = scan.transfers
      .map((t) => ({ txHash: t.txHash, token: t.token.symbol, amount: t.amount, to: t.to, from: t.from }))
      .sort((x, y) => x.token.localeCompare(y.token));
    expect(summary).toEqual([
      {
        txHash: funded.solTx,
        token: "SOL",
        amount: 3_000_000n,
        to: watched,
        from: devnet.treasury.solana.address,
      },
      {
        txHash: funded.usdcTx,
        token: "USDC",
        amount: 4_000_000n,
        to: watched,
        from: devnet.treasury.solana.address,
      },
    ]);
    const usdcIndex = scan.transfers.find((t) => t.token.symbol === "USDC")?.index;
    const direct = await solana.getIncomingTransfers(funded.usdcTx ?? "", [watched]);
    expect(direct.map((t) => [t.txHash, t.index, t.amount])).toEqual([
      [funded.usdcTx, usdcIndex, 4_000_000n],
    ]);
    devnet.advanceSolanaSlots(1);
    expect((await solana.scanIncoming(async () => [watched], scan.cursor)).transfers).toEqual([]);
  });

  it("reads an account's history from the newest back to the cursor: a few entries first, further pages only while all are new", async () => {
    const watched = (await solanaKey()).address;
    const limits: number[] = [];
    const proxy = await startRpcProxy(devnet.solana.rpcUrl, (method, _nth, body) => {
      if (method === "getSignaturesForAddress") {
        const { params } = JSON.parse(body) as { params: [string, { limit?: number }?] };
        if (params[0] === watched) limits.push(params[1]?.limit ?? 1000);
      }
      return "forward";
    });
    onTestFinished(() => proxy.close());
    const scanner = new SolanaChain({ ...solana.config, rpcUrl: proxy.url });
    const start = await scanner.scanIncoming(async () => [watched], null);
    const sent: string[] = [];
    for (let i = 0; i < 30; i++)
      sent.push((await fundSolana(devnet, watched, { sol: 1_000_000n })).solTx ?? "");
    devnet.advanceSolanaSlots(1);

    // 30 transfers since the cursor: the first page is short, so the scan reads on.
    const scan = await scanner.scanIncoming(async () => [watched], start.cursor);
    expect(scan.transfers.map((t) => t.txHash).sort()).toEqual([...sent].sort());
    expect(limits.length).toBeGreaterThan(1);
    expect(limits[0]).toBeLessThanOrEqual(20);
    // Nothing new: one short page of the 30 old ones, not the account's whole history.
    limits.length = 0;
    devnet.advanceSolanaSlots(1);
    expect((await scanner.scanIncoming(async () => [watched], scan.cursor)).transfers).toEqual([]);
    expect(limits).toHaveLength(1);
    expect(limits[0]).toBeLessThanOrEqual(20);
  });

  /**
   * A FAKE of what the machine cannot reach: the devnet behind a load balancer whose node answering
   * `method` is at slot 1: it lists no history (it has seen none of it) and refuses a `minContextSlot` past
   * its slot, as a node does; it has no transaction to return. Every other call reaches the devnet.
   */
  async function answeredBehind(method: "getSignaturesForAddress" | "getTransaction"): Promise<SolanaChain> {
    const balancer = await startRpcProxy(devnet.solana.rpcUrl, (called, _nth, body) => {
      if (called !== method) return "forward";
      const { id, params } = JSON.parse(body) as {
        id: number;
        params: [string, { minContextSlot?: number }?];
      };
      const answer =
        (params[1]?.minContextSlot ?? 0) > 1
          ? {
              error: {
                code: -32016,
                message: "Minimum context slot has not been reached",
                data: { contextSlot: 1 },
              },
            }
          : { result: method === "getTransaction" ? null : [] };
      return { status: 200, body: JSON.stringify({ jsonrpc: "2.0", id, ...answer }) };
    });
    onTestFinished(() => balancer.close());
    return new SolanaChain({ ...solana.config, rpcUrl: balancer.url });
  }

  it("does not pass over transfers a node behind has not listed: it asks for history from a node at the slot it scans to", async () => {
    const watched = (await solanaKey()).address;
    const balanced = await answeredBehind("getSignaturesForAddress");
    const start = await balanced.scanIncoming(async () => [watched], null);
    const funded = await fundSolana(devnet, watched, { usdc: 7n });
    devnet.advanceSolanaSlots(2);
    await expect(balanced.scanIncoming(async () => [watched], start.cursor)).rejects.toBeInstanceOf(
      ChainRequestError,
    );
    // Read again from the same cursor where the history is current, the transfer is found.
    const scan = await solana.scanIncoming(async () => [watched], start.cursor);
    expect(scan.transfers.map((t) => [t.txHash, t.amount])).toEqual([[funded.usdcTx, 7n]]);
  });

  it("does not pass over a listed transfer a node behind does not return yet, and passes over one that never came once no node could lag so far", async () => {
    const watched = (await solanaKey()).address;
    const balanced = await answeredBehind("getTransaction");
    const start = await balanced.scanIncoming(async () => [watched], null);
    await fundSolana(devnet, watched, { usdc: 8n });
    devnet.advanceSolanaSlots(2);
    await expect(balanced.scanIncoming(async () => [watched], start.cursor)).rejects.toBeInstanceOf(
      ChainRequestError,
    );
    // Listed, landed long ago by every node's count, and still returned by none: not a transfer to record.
    devnet.advanceSolanaSlots(Number(SOLANA_NODE_LAG) + 10);
    expect((await balanced.scanIncoming(async () => [watched], start.cursor)).transfers).toEqual([]);
  });

  it("confirms a transfer whose transaction no node serves once its status is finalized, without the fee only the transaction tells", async () => {
    const sender = await fundedSender();
    const signed = await signedTransfer(solana, {
      privateKey: sender.privateKey,
      to: (await solanaKey()).address,
      token: sol,
      amount: 1_000_000n,
    });
    await solana.broadcast(signed);
    expect((await settled(signed, sender.address)).state).toBe("confirmed");
    // A node keeping no transaction history answers the status alone: pending for good, before.
    const historyless = await answeredBehind("getTransaction");
    devnet.advanceSolanaSlots(40);
    expect(await historyless.getTransferStatus(signed, sender.address)).toEqual({ state: "confirmed" });
  });

  it("tells, when a token is sent, a recipient nobody signs for: a program, a sysvar; a wallet is none", async () => {
    const sender = await fundedSender();
    const recipientOf = async (to: string) =>
      (await solana.planTransferWithBalances({ from: sender.address, to, token: usdc, amount: 1n }))
        .lostRecipient;
    expect(await recipientOf("TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA")).toBe("program");
    expect(await recipientOf("ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL")).toBe("program");
    expect(await recipientOf("SysvarRent111111111111111111111111111111111")).toBe("sysvar");
    expect(await recipientOf((await solanaKey()).address)).toBeUndefined();
  });

  it("rescans a cluster restarted behind the cursor from its first slot", async () => {
    const restarted = await startDevnet();
    try {
      const { solana: fresh } = await devnetClients(restarted);
      const watched = (await solanaKey()).address;
      const funded = await fundSolana(restarted, watched, { usdc: 5n });
      devnet.advanceSolanaSlots(1_000);
      const stale = (await solana.scanIncoming(async () => [], null)).cursor;
      restarted.advanceSolanaSlots(2);
      const scan = await fresh.scanIncoming(async () => [watched], stale);
      expect(scan.transfers.map((t) => t.txHash)).toEqual([funded.usdcTx]);
    } finally {
      await restarted.stop();
    }
  });
});

describe("tokenProgramAccount", () => {
  /** The first 166 bytes of an account, with `byte` set at `at`. */
  const head = (at: number, byte: number) => {
    const data = new Uint8Array(166);
    data[at] = byte;
    return data;
  };

  it("tells mints, token accounts and multisigs apart by size, and Token-2022 accounts with extensions by byte 165", () => {
    for (const owner of [TOKEN_PROGRAM_ADDRESS, TOKEN_2022_PROGRAM_ADDRESS]) {
      expect(tokenProgramAccount(owner, 82, head(0, 0))).toBe("mint");
      expect(tokenProgramAccount(owner, 165, head(0, 0))).toBe("token_account");
      expect(tokenProgramAccount(owner, 170, head(165, 1))).toBe("mint");
      expect(tokenProgramAccount(owner, 170, head(165, 2))).toBe("token_account");
    }
    expect(tokenProgramAccount(TOKEN_PROGRAM_ADDRESS, 355, head(2, 1))).toBe("multisig");
  });

  it("takes for a multisig only an initialized one of SPL Token, whose transfers honour no other program's", () => {
    expect(tokenProgramAccount(TOKEN_PROGRAM_ADDRESS, 355, head(2, 0))).toBe("other");
    expect(tokenProgramAccount(TOKEN_2022_PROGRAM_ADDRESS, 355, head(2, 1))).toBe("other");
    expect(tokenProgramAccount(TOKEN_PROGRAM_ADDRESS, 100, head(0, 0))).toBe("other");
    expect(tokenProgramAccount(TOKEN_2022_PROGRAM_ADDRESS, 200, head(165, 0))).toBe("other");
  });
});
