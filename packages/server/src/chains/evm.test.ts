import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { type Devnet, fundEvm, startDevnet } from "@svc/devnet";
import { createPublicClient, type Hex, hexToBigInt, http, numberToHex } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { devnetClients, evmKey, signedTransfer } from "../../test/support/chains.ts";
import { eventually } from "../../test/support/eventually.ts";
import { startRpcProxy } from "../../test/support/rpc-proxy.ts";
import { ChainRequestError, NonceTakenError } from "./errors.ts";
import { EvmChain } from "./evm.ts";
import type { ChainClient, SignedTransfer, TokenInfo, TransferStatus } from "./types.ts";

/** The reads behind an EVM plan's fee caps (viem's estimateFeesPerGas). */
const FEE_READS = ["eth_getBlockByNumber", "eth_maxPriorityFeePerGas"];

let devnet: Devnet;
let base: ChainClient;
let usdc: TokenInfo;
let eth: TokenInfo;

beforeAll(async () => {
  devnet = await startDevnet();
  ({ base } = await devnetClients(devnet));
  eth = base.config.nativeToken;
  usdc = base.config.tokens[0] as TokenInfo;
});
afterAll(() => devnet.stop());

async function fundedSender() {
  const sender = evmKey();
  await fundEvm(devnet, sender.address, { eth: 10n ** 18n, usdc: 50_000_000n });
  return sender;
}

/**
 * A funded sender's ETH transfer of `amount` to a new recipient, broadcast after `watching`'s scan cursor
 * was taken at the head: what a scan from `cursor` should find.
 */
async function sentToWatched(watching: ChainClient, amount: bigint) {
  const sender = await fundedSender();
  const recipient = evmKey().address;
  const cursor = (await watching.scanIncoming(async () => [recipient], null)).cursor;
  const signed = await signedTransfer(base, {
    privateKey: sender.privateKey,
    to: recipient,
    token: eth,
    amount,
  });
  await base.broadcast(signed);
  return { sender, recipient, cursor, signed };
}

/** The status once the node has mined the transfer (anvil mines on receipt, but its receipt can lag). */
function settled(signed: SignedTransfer, from: string): Promise<TransferStatus> {
  return eventually(async () => {
    const status = await base.getTransferStatus(signed, from);
    return status.state === "pending" ? undefined : status;
  });
}

describe("EvmChain on the local chain", () => {
  it("describes the devnet chain with a local chain id, ETH and the devnet USDC", () => {
    expect(base.config).toMatchObject({ name: "base", kind: "evm", network: "eip155:31337", testnet: true });
    expect(eth).toMatchObject({ symbol: "ETH", address: null, decimals: 18 });
    expect(usdc).toMatchObject({
      symbol: "USDC",
      address: devnet.evm.usdc,
      decimals: 6,
      usdPrice: "1",
      eip712: { name: "USD Coin", version: "2" },
    });
  });

  it("validates addresses, checksums included", () => {
    expect(base.isValidAddress("0x70997970C51812dc3A010C7d01b50e0d17dc79C8")).toBe(true);
    expect(base.isValidAddress("0x70997970c51812dc3a010c7d01b50e0d17dc79c8")).toBe(true);
    expect(base.isValidAddress("0x70997970C51812dc3A010C7d01b50e0d17dc79c8")).toBe(false);
    expect(base.isValidAddress("E2DYNoae5S1dao9FU9szVNJyw3gwANvgcQ8V7j4ZYqu")).toBe(false);
  });

  it("signs a USDC transfer that is pending until broadcast, then confirmed, moving exactly the amount", async () => {
    const sender = await fundedSender();
    const recipient = evmKey().address;
    const { fee } = await base.planTransfer({
      from: sender.address,
      to: recipient,
      token: usdc,
      amount: 12_345_678n,
    });
    expect(fee).toBeGreaterThan(0n);
    const signed = await signedTransfer(base, {
      privateKey: sender.privateKey,
      to: recipient,
      token: usdc,
      amount: 12_345_678n,
    });
    expect(signed.txHash).toMatch(/^0x[0-9a-f]{64}$/);
    expect(signed.nonce).toBe(0);
    expect(await base.getTransferStatus(signed, sender.address)).toEqual({ state: "pending" });

    const ethBefore = await base.getBalance(sender.address, eth);
    await base.broadcast(signed);
    await base.broadcast(signed); // the same transfer twice is harmless
    const status = await settled(signed, sender.address);
    expect(status.state).toBe("confirmed");
    expect(await base.getBalance(recipient, usdc)).toBe(12_345_678n);
    expect(await base.getBalance(sender.address, usdc)).toBe(50_000_000n - 12_345_678n);
    expect(ethBefore - (await base.getBalance(sender.address, eth))).toBeLessThanOrEqual(fee);
  });

  it("signs a native transfer with the pending nonce and confirms it", async () => {
    const sender = await fundedSender();
    const recipient = evmKey().address;
    const first = await signedTransfer(base, {
      privateKey: sender.privateKey,
      to: recipient,
      token: eth,
      amount: 10n ** 15n,
    });
    await base.broadcast(first);
    expect(await base.getPendingNonce?.(sender.address)).toBe(1);
    const second = await signedTransfer(base, {
      privateKey: sender.privateKey,
      to: recipient,
      token: eth,
      amount: 2n * 10n ** 15n,
    });
    expect(second.nonce).toBe(1);
    await base.broadcast(second);
    expect((await settled(second, sender.address)).state).toBe("confirmed");
    expect(await base.getBalance(recipient, eth)).toBe(3n * 10n ** 15n);
    const plan = await base.planTransfer({ from: sender.address, to: recipient, token: eth, amount: 1n });
    expect(plan.fee).toBeGreaterThanOrEqual(21_000n);
    expect(plan.evm?.pendingNonce).toBe(2);
  });

  it("plans a transfer with the sender's balances in one request to the node: the figures each read alone gives", async () => {
    const proxy = await startRpcProxy(devnet.evm.rpcUrl, () => "forward");
    const planning = new EvmChain({ ...base.config, rpcUrl: proxy.url });
    const viemClient = createPublicClient({ transport: http(devnet.evm.rpcUrl) });
    try {
      const sender = await fundedSender();
      const recipient = evmKey().address;
      for (const token of [usdc, eth]) {
        const asked = proxy.methods.length;
        const { plan, balance, nativeBalance } = await planning.planTransferWithBalances({
          from: sender.address,
          to: recipient,
          token,
          amount: 1_000n,
        });
        // The pending nonce, and the nonce at the latest block the balances are read at.
        const batch =
          token === usdc
            ? "eth_estimateGas,eth_getTransactionCount,eth_getTransactionCount,eth_call,eth_getBalance"
            : "eth_estimateGas,eth_getTransactionCount,eth_getTransactionCount,eth_getBalance";
        // Besides the batch, only the fee caps' reads, which later plans reuse for a second.
        expect(proxy.methods.slice(asked).filter((m) => !FEE_READS.includes(m))).toEqual([batch]);
        expect(balance).toBe(await base.getBalance(sender.address, token));
        expect(nativeBalance).toBe(await base.getBalance(sender.address, eth));
        expect(plan.evm?.pendingNonce).toBe(0);
        expect(plan.evm?.minedNonce).toBe(0);
        expect(plan.fee).toBe((plan.evm?.gas ?? 0n) * (plan.evm?.maxFeePerGas ?? 0n));
        // A plain ETH transfer costs exactly 21,000; a token transfer gets a fifth over the node's estimate.
        const estimate = await viemClient.estimateGas({
          account: sender.address,
          to: plan.evm?.to ?? "0x",
          value: plan.evm?.value ?? 0n,
          ...(plan.evm?.data ? { data: plan.evm.data } : {}),
        });
        expect(plan.evm?.gas).toBe(token === eth ? 21_000n : (estimate * 12n) / 10n);
      }
      // A sender holding none of the token: the estimate reverts, the plan falls back to a standard bound.
      const empty = evmKey().address;
      const { plan, balance } = await planning.planTransferWithBalances({
        from: empty,
        to: recipient,
        token: usdc,
        amount: 1_000n,
      });
      expect(balance).toBe(0n);
      expect(plan.evm?.gas).toBe(100_000n);
    } finally {
      await proxy.close();
    }
  });

  it("reads the state of pending x402 authorizations in the balances' request, before the balances", async () => {
    const proxy = await startRpcProxy(devnet.evm.rpcUrl, () => "forward");
    const reading = new EvmChain({ ...base.config, rpcUrl: proxy.url });
    try {
      const sender = await fundedSender();
      const unused = {
        token: usdc.address as `0x${string}`,
        authorizer: sender.address,
        nonce: numberToHex(12_345n, { size: 32 }),
      };
      // A token without authorizationState (no contract there): not known used.
      const elsewhere = { ...unused, token: evmKey().address };
      let asked = proxy.methods.length;
      const funds = await reading.getFundsRead?.(sender.address, usdc, [unused, elsewhere]);
      expect(proxy.methods.slice(asked)).toEqual(["eth_call,eth_call,eth_getTransactionCount,eth_call"]);
      expect(funds).toEqual({ balance: 50_000_000n, minedNonce: 0, authorizationsUsed: [false, false] });

      asked = proxy.methods.length;
      const planned = await reading.planTransferWithBalances(
        { from: sender.address, to: evmKey().address, token: usdc, amount: 1n },
        [unused],
      );
      expect(proxy.methods.slice(asked).filter((m) => !FEE_READS.includes(m))).toEqual([
        "eth_estimateGas,eth_getTransactionCount,eth_call,eth_getTransactionCount,eth_call,eth_getBalance",
      ]);
      expect(planned).toMatchObject({ balance: 50_000_000n, authorizationsUsed: [false] });
      expect(planned.plan.evm?.minedNonce).toBe(0);
    } finally {
      await proxy.close();
    }
  });

  it("tells which of several transfers have landed, and how, from one request for their receipts", async () => {
    const proxy = await startRpcProxy(devnet.evm.rpcUrl, () => "forward");
    const watching = new EvmChain({ ...base.config, rpcUrl: proxy.url });
    try {
      const sender = await fundedSender();
      const recipient = evmKey().address;
      const signed: SignedTransfer[] = [];
      for (const nonce of [0, 1, 2]) {
        signed.push(
          await signedTransfer(base, {
            privateKey: sender.privateKey,
            to: recipient,
            token: eth,
            amount: 1n,
            nonce,
          }),
        );
      }
      // More USDC than the sender holds: the plan falls back to a fixed gas limit, and the transfer is mined,
      // reverted.
      const reverting = await base.signTransfer(
        await base.planTransfer({ from: sender.address, to: recipient, token: usdc, amount: 10n ** 12n }),
        sender.privateKey,
        3,
      );
      const [first, second, unsent] = signed as [SignedTransfer, SignedTransfer, SignedTransfer];
      // The third is signed with a nonce of its own but never sent: nothing on chain knows it, and the
      // reverting one waits behind it; only the first two land.
      await base.broadcast(first);
      await base.broadcast(second);
      await settled(second, sender.address);
      const asked = proxy.methods.length;
      const statuses = await watching.getLandedStatuses(
        [first, second, unsent].map((transfer) => ({ signed: transfer, from: sender.address })),
      );
      expect(statuses.map((status) => status?.state)).toEqual(["confirmed", "confirmed", undefined]);
      expect(proxy.methods.slice(asked).filter((m) => m !== "eth_getBlockByHash")).toEqual([
        "eth_getTransactionReceipt,eth_getTransactionReceipt,eth_getTransactionReceipt",
      ]);

      await base.broadcast(unsent);
      await base.broadcast(reverting);
      const reverted = await settled(reverting, sender.address);
      expect(reverted).toEqual({ state: "failed", reason: "reverted", fee: expect.any(BigInt) });
      expect(
        (
          await watching.getLandedStatuses(
            [unsent, reverting].map((t) => ({ signed: t, from: sender.address })),
          )
        ).map((status) => status?.state),
      ).toEqual(["confirmed", "failed"]);
    } finally {
      await proxy.close();
    }
  });

  it("scans blocks ten to a request, and finds a native transfer among them", async () => {
    const proxy = await startRpcProxy(devnet.evm.rpcUrl, () => "forward");
    const watching = new EvmChain({ ...base.config, rpcUrl: proxy.url });
    try {
      const { sender, recipient, cursor, signed } = await sentToWatched(watching, 5n);
      await settled(signed, sender.address);
      // 24 empty blocks after it: 25 or more to scan.
      await fetch(devnet.evm.rpcUrl, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "anvil_mine", params: ["0x18"] }),
      });
      const asked = proxy.methods.length;
      const scan = await watching.scanIncoming(async () => [recipient], cursor);
      expect(scan.transfers).toEqual([
        expect.objectContaining({ txHash: signed.txHash, to: recipient, amount: 5n, index: -1 }),
      ]);
      // The first asks for the cursor's block (was it replaced?); the rest read the range.
      const [cursorCheck, ...blockRequests] = proxy.methods
        .slice(asked)
        .filter((m) => m.split(",")[0] === "eth_getBlockByNumber")
        .map((m) => m.split(",").length);
      expect(cursorCheck).toBe(1);
      const scanned = Number(scan.cursor.split(":")[0]) - Number(cursor.split(":")[0]);
      expect(scanned).toBeGreaterThanOrEqual(25);
      expect(blockRequests.reduce((a, b) => a + b, 0)).toBe(scanned);
      expect(blockRequests.length).toBe(Math.ceil(scanned / 10));
    } finally {
      await proxy.close();
    }
  });

  it("reads a range again rather than pass over a transfer whose receipt the node does not serve yet", async () => {
    const lagging = await nodeBehind(devnet.evm.rpcUrl);
    lagging.serveReceipts = false;
    const watching = new EvmChain({ ...base.config, rpcUrl: lagging.url });
    try {
      const { sender, recipient, cursor, signed } = await sentToWatched(watching, 7n);
      await settled(signed, sender.address);
      await expect(watching.scanIncoming(async () => [recipient], cursor)).rejects.toBeInstanceOf(
        ChainRequestError,
      );
      lagging.serveReceipts = true;
      const scan = await watching.scanIncoming(async () => [recipient], cursor);
      expect(scan.transfers.map((t) => [t.txHash, t.amount])).toEqual([[signed.txHash, 7n]]);
    } finally {
      await lagging.close();
    }
  });

  it("reads a range again rather than pass over a token transfer in blocks whose logs the node does not serve yet", async () => {
    const lagging = await nodeBehind(devnet.evm.rpcUrl);
    const proxy = await startRpcProxy(lagging.url, () => "forward");
    const watching = new EvmChain({ ...base.config, rpcUrl: proxy.url });
    try {
      const sender = await fundedSender();
      const recipient = evmKey().address;
      const cursor = (await watching.scanIncoming(async () => [recipient], null)).cursor;
      // The node behind has the logs of every block up to the cursor's, and none after it.
      lagging.logsHead = BigInt(cursor.split(":")[0] ?? "");
      const signed = await signedTransfer(base, {
        privateKey: sender.privateKey,
        to: recipient,
        token: usdc,
        amount: 9n,
      });
      await base.broadcast(signed);
      await settled(signed, sender.address);
      await expect(watching.scanIncoming(async () => [recipient], cursor)).rejects.toBeInstanceOf(
        ChainRequestError,
      );

      lagging.logsHead = undefined;
      const asked = proxy.methods.length;
      const scan = await watching.scanIncoming(async () => [recipient], cursor);
      expect(scan.transfers.map((t) => [t.txHash, t.token.symbol, t.amount])).toEqual([
        [signed.txHash, "USDC", 9n],
      ]);
      // A node that has the blocks answers the range in one read, and no block is asked about by its hash.
      expect(proxy.methods.slice(asked).filter((m) => m.includes("eth_getLogs"))).toEqual(["eth_getLogs"]);
    } finally {
      await proxy.close();
      await lagging.close();
    }
  });

  it("confirms a mined transfer from its receipt alone once a scan has read its block, with the block's time", async () => {
    const proxy = await startRpcProxy(devnet.evm.rpcUrl, () => "forward");
    const watching = new EvmChain({ ...base.config, rpcUrl: proxy.url });
    try {
      const { sender, recipient, cursor, signed } = await sentToWatched(watching, 1n);
      const scanned = await eventually(async () => {
        const scan = await watching.scanIncoming(async () => [recipient], cursor);
        return scan.transfers.find((t) => t.txHash === signed.txHash);
      });
      const asked = proxy.methods.length;
      const status = await watching.getTransferStatus(signed, sender.address);
      expect(status).toEqual({ state: "confirmed", blockTime: scanned.blockTime, fee: expect.any(BigInt) });
      expect(proxy.methods.slice(asked)).toEqual(["eth_getTransactionReceipt"]);

      // A chain that has not seen the block asks for it, by the hash the receipt names.
      const fresh = new EvmChain({ ...base.config, rpcUrl: proxy.url });
      const before = proxy.methods.length;
      expect(await fresh.getTransferStatus(signed, sender.address)).toEqual(status);
      expect(proxy.methods.slice(before)).toEqual(["eth_getTransactionReceipt", "eth_getBlockByHash"]);
    } finally {
      await proxy.close();
    }
  });

  it("reports dropped when the transfer's nonce was used by another transaction", async () => {
    const sender = await fundedSender();
    const a = await signedTransfer(base, {
      privateKey: sender.privateKey,
      to: evmKey().address,
      token: usdc,
      amount: 1n,
      nonce: 0,
    });
    const b = await signedTransfer(base, {
      privateKey: sender.privateKey,
      to: evmKey().address,
      token: usdc,
      amount: 2n,
      nonce: 0,
    });
    await base.broadcast(b);
    expect((await settled(b, sender.address)).state).toBe("confirmed");
    expect(await base.getTransferStatus(a, sender.address)).toEqual({
      state: "dropped",
      reason: "nonce 0 was used by another transaction",
    });
    await expect(base.broadcast(a)).rejects.toBeInstanceOf(NonceTakenError);
  });

  it("reports failed for a transfer that reverts on chain", async () => {
    const sender = await fundedSender();
    // More USDC than the sender holds: estimation reverts, so the fallback gas limit is used and it lands.
    const signed = await signedTransfer(base, {
      privateKey: sender.privateKey,
      to: evmKey().address,
      token: usdc,
      amount: 10n ** 12n,
    });
    const before = await base.getBalance(sender.address, eth);
    await base.broadcast(signed);
    const status = await settled(signed, sender.address);
    // It moved no USDC, and paid its gas: the fee it states is what the sender's ETH lost.
    const fee = before - (await base.getBalance(sender.address, eth));
    expect(fee).toBeGreaterThan(0n);
    expect(status).toEqual({ state: "failed", reason: "reverted", fee });
  });

  it("scans incoming native and USDC transfers to watched addresses once, with stable indexes", async () => {
    const watched = evmKey().address;
    const other = evmKey().address;
    const start = await base.scanIncoming(async () => [watched], null);
    expect(start.transfers).toEqual([]);
    const funded = await fundEvm(devnet, watched, { eth: 7n, usdc: 3_000_000n });
    await fundEvm(devnet, other, { usdc: 1n });
    let asked = 0;
    const scan = await base.scanIncoming(async () => {
      asked++;
      return [watched.toLowerCase()];
    }, start.cursor);
    expect(asked).toBe(1);
    const summary = scan.transfers.map((t) => ({
      txHash: t.txHash,
      token: t.token.symbol,
      amount: t.amount,
      to: t.to,
      from: t.from,
    }));
    expect(summary).toEqual([
      {
        txHash: funded.ethTx,
        token: "ETH",
        amount: 7n,
        to: watched.toLowerCase(),
        from: devnet.treasury.evm.address,
      },
      {
        txHash: funded.usdcTx,
        token: "USDC",
        amount: 3_000_000n,
        to: watched.toLowerCase(),
        from: devnet.treasury.evm.address,
      },
    ]);
    expect(scan.transfers[0]?.index).toBe(-1);
    expect(scan.transfers[1]?.index).toBeGreaterThanOrEqual(0);
    // The same transaction, looked up directly, gives the same key.
    const direct = await base.getIncomingTransfers(funded.usdcTx ?? "", [watched]);
    expect(direct.map((t) => [t.txHash, t.index, t.amount])).toEqual([
      [funded.usdcTx, scan.transfers[1]?.index, 3_000_000n],
    ]);
    // Nothing new: the next scan from the returned cursor finds nothing.
    expect((await base.scanIncoming(async () => [watched], scan.cursor)).transfers).toEqual([]);
  });

  it("scans a long range in bounded steps, saying when there is more, and finds each transfer once", async () => {
    const watched = evmKey().address;
    let cursor = (await base.scanIncoming(async () => [watched], null)).cursor;
    const mine = (blocks: number) =>
      fetch(devnet.evm.rpcUrl, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          jsonrpc: "2.0",
          id: 1,
          method: "anvil_mine",
          params: [`0x${blocks.toString(16)}`],
        }),
      });
    await mine(70);
    const funded = await fundEvm(devnet, watched, { usdc: 9n });
    await mine(70);
    const found: string[] = [];
    let scans = 0;
    for (let more = true; more; scans++) {
      const scan = await base.scanIncoming(async () => [watched], cursor);
      found.push(...scan.transfers.map((t) => t.txHash));
      cursor = scan.cursor;
      more = scan.more === true;
    }
    expect(found).toEqual([funded.usdcTx]);
    expect(scans).toBeGreaterThanOrEqual(3); // 141 blocks, at most 50 per scan
  });

  it("rescans a chain restarted behind the cursor from its first block", async () => {
    const restarted = await startDevnet();
    try {
      const { base: fresh } = await devnetClients(restarted);
      const watched = evmKey().address;
      const funded = await fundEvm(restarted, watched, { usdc: 5n });
      // A cursor of the long-running chain, far ahead of the fresh one.
      await fetch(devnet.evm.rpcUrl, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "anvil_mine", params: ["0x100"] }),
      });
      const stale = (await base.scanIncoming(async () => [], null)).cursor;
      const scan = await fresh.scanIncoming(async () => [watched], stale);
      expect(scan.transfers.map((t) => t.txHash)).toEqual([funded.usdcTx]);
    } finally {
      await restarted.stop();
    }
  });
});

/**
 * A FAKE node behind a load balancer's other node, in front of the devnet: its blocks are current, but while
 * `serveReceipts` is false it answers every receipt null, and while `logsHead` is set its logs stop at that
 * block as a node whose head it is answers them: a range past it cut short without a word, a block past it
 * asked for by hash refused ("unknown block").
 */
async function nodeBehind(upstream: string) {
  const state: { serveReceipts: boolean; logsHead: bigint | undefined } = {
    serveReceipts: true,
    logsHead: undefined,
  };
  type Call = { jsonrpc: "2.0"; id: number; method: string; params?: unknown[] };
  const forward = async (call: Call) =>
    (
      await fetch(upstream, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(call),
      })
    ).json() as Promise<{ result?: unknown }>;
  const answer = async (call: Call) => {
    if (call.method === "eth_getTransactionReceipt" && !state.serveReceipts)
      return { jsonrpc: "2.0", id: call.id, result: null };
    const head = state.logsHead;
    if (call.method === "eth_getLogs" && head !== undefined) {
      const filter = call.params?.[0] as { fromBlock?: Hex; toBlock?: Hex; blockHash?: Hex };
      if (filter.blockHash !== undefined) {
        const block = await forward({
          ...call,
          method: "eth_getBlockByHash",
          params: [filter.blockHash, false],
        });
        if (hexToBigInt((block.result as { number: Hex }).number) > head)
          return { jsonrpc: "2.0", id: call.id, error: { code: -32000, message: "unknown block" } };
      } else if (filter.toBlock !== undefined && hexToBigInt(filter.toBlock) > head) {
        if (filter.fromBlock !== undefined && hexToBigInt(filter.fromBlock) > head)
          return { jsonrpc: "2.0", id: call.id, result: [] };
        return forward({ ...call, params: [{ ...filter, toBlock: numberToHex(head) }] });
      }
    }
    return forward(call);
  };
  const server = createServer(async (request, response) => {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as Call | Call[];
    const answers = await Promise.all((Array.isArray(body) ? body : [body]).map(answer));
    response
      .writeHead(200, { "content-type": "application/json" })
      .end(JSON.stringify(Array.isArray(body) ? answers : answers[0]));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return Object.assign(state, {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  });
}
