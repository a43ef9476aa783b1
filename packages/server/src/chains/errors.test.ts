import { createServer, type Server } from "node:net";
import { inspect } from "node:util";
import { type Devnet, fundEvm, fundSolana, IDLE_BLOCK_SECONDS, startDevnet } from "@svc/devnet";
import { createTestClient, http } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { devnetClients, evmKey, signedTransfer, solanaKey } from "../../test/support/chains.ts";
import { type ProxyAction, startRpcProxy } from "../../test/support/rpc-proxy.ts";
import { AppError } from "../internal/errors.ts";
import {
  ChainRequestError,
  ChainTimeoutError,
  ChainUnavailableError,
  ChainUnreachableError,
  chainCall,
  NonceTakenError,
  TransactionRejectedError,
  UnclearSendError,
} from "./errors.ts";
import { EvmChain } from "./evm.ts";
import { SolanaChain } from "./solana.ts";
import type { ChainClient, ChainConfig } from "./types.ts";

// The path holds what a provider's API key looks like: no error may carry it.
const SECRET = "k3yS3cretPr0vider";
const EVM_OWNER = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";
const SOLANA_OWNER = "E2DYNoae5S1dao9FU9szVNJyw3gwANvgcQ8V7j4ZYqu";

let devnet: Devnet;
let local: { base: ChainClient; solana: ChainClient };

beforeAll(async () => {
  devnet = await startDevnet();
  local = await devnetClients(devnet);
});
afterAll(() => devnet.stop());

/** A client of the devnet's chain of `kind`, reached at `rpcUrl` instead. */
function clientAt(kind: "evm" | "solana", rpcUrl: string, options: { timeoutMs?: number } = {}) {
  const config: ChainConfig = { ...(kind === "evm" ? local.base : local.solana).config, rpcUrl };
  return kind === "evm" ? new EvmChain(config, options) : new SolanaChain(config, options);
}

const ownerOf = (kind: "evm" | "solana") => (kind === "evm" ? EVM_OWNER : SOLANA_OWNER);
const balanceMethod = (kind: "evm" | "solana") => (kind === "evm" ? "eth_getBalance" : "getBalance");
const sendMethod = (kind: "evm" | "solana") =>
  kind === "evm" ? "eth_sendRawTransaction" : "sendTransaction";
const failure = (promise: Promise<unknown>) =>
  promise.then(
    () => {
      throw new Error("expected the call to fail");
    },
    (error: unknown) => error,
  );

/** A fresh key of `kind` holding `native` atomic units of the native coin. */
async function fundedKey(kind: "evm" | "solana", native: bigint) {
  if (kind === "evm") {
    const key = evmKey();
    await fundEvm(devnet, key.address, { eth: native });
    return key;
  }
  const key = await solanaKey();
  await fundSolana(devnet, key.address, { sol: native });
  return key;
}

/** A proxy in front of the devnet's endpoint of `kind`, closed after the test. */
async function proxyFor(
  kind: "evm" | "solana",
  decide: (method: string, nth: number, body: string) => ProxyAction,
) {
  return startRpcProxy(kind === "evm" ? devnet.evm.rpcUrl : devnet.solana.rpcUrl, decide);
}

/** A TCP server that accepts connections and never answers. */
async function silentServer(): Promise<{ url: string; server: Server }> {
  const server = createServer(() => {});
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  return { url: `http://127.0.0.1:${port}/v2/${SECRET}`, server };
}

describe.concurrent.each(["evm", "solana"] as const)(
  "%s: an endpoint that gives no usable answer",
  (kind) => {
    it("refusing connections: ChainUnreachableError without the URL's key, 502 chain_unavailable for callers", async () => {
      // Nothing listens on port 9.
      const client = clientAt(kind, `http://127.0.0.1:9/v2/${SECRET}`);
      const native = client.config.nativeToken;
      const error = await failure(client.getBalance(ownerOf(kind), native));
      expect(error).toBeInstanceOf(ChainUnreachableError);
      expect((error as ChainUnreachableError).facts).toEqual({
        chain: client.config.name,
        method: balanceMethod(kind),
      });
      expect(inspect(error, { depth: 10 })).not.toContain(SECRET);
      const wrapped = await failure(
        chainCall(client.config.name, () => client.getBalance(ownerOf(kind), native)),
      );
      expect(wrapped).toBeInstanceOf(AppError);
      expect(wrapped).toMatchObject({
        status: 502,
        reason: "chain_unavailable",
        message: `The ${client.config.name} RPC endpoint is not answering`,
      });
      expect(inspect(wrapped, { depth: 10 })).not.toContain(SECRET);
    });

    it("a gateway failing at a URL with credentials and a key in its path: the error holds neither, at any depth", async () => {
      const failing = await proxyFor(kind, () => ({ status: 500 }));
      try {
        const url = new URL(failing.url);
        const client = clientAt(kind, `http://rpcuser:Pa55word@${url.host}/v2/${SECRET}?api-key=${SECRET}`);
        const error = await failure(client.getBalance(ownerOf(kind), client.config.nativeToken));
        expect(error).toBeInstanceOf(ChainUnreachableError);
        const written = inspect(error, { depth: 10 });
        expect(written).toContain(url.host);
        expect(written).not.toContain(SECRET);
        expect(written).not.toContain("Pa55word");
      } finally {
        await failing.close();
      }
    });

    it("accepting and never answering: ChainTimeoutError after the time limit, without the URL's key", async () => {
      const silent = await silentServer();
      try {
        const client = clientAt(kind, silent.url, { timeoutMs: 300 });
        const error = await failure(client.getBalance(ownerOf(kind), client.config.nativeToken));
        expect(error).toBeInstanceOf(ChainTimeoutError);
        expect((error as ChainTimeoutError).facts).toEqual({
          chain: client.config.name,
          method: balanceMethod(kind),
          timeoutMs: 300,
        });
        expect(inspect(error, { depth: 10 })).not.toContain(SECRET);
      } finally {
        silent.server.close();
      }
    });

    it("a token balance read through a failing gateway is ChainUnreachableError too (viem's call error handling does not swallow it)", async () => {
      const busy = await proxyFor(kind, () => ({ status: 503 }));
      try {
        const token = (kind === "evm" ? local.base : local.solana).config.tokens[0];
        if (!token) throw new Error("the devnet serves no token");
        const error = await failure(clientAt(kind, busy.url).getBalance(ownerOf(kind), token));
        expect(error).toBeInstanceOf(ChainUnreachableError);
        expect((error as ChainUnreachableError).facts.status).toBe(503);
      } finally {
        await busy.close();
      }
    });

    it.each([
      ["not JSON (a proxy's page)", undefined],
      ["JSON but no JSON-RPC answer", "{}"],
      ["null", "null"],
    ])(
      "answering 200 with a body that is %s: ChainUnreachableError, 502 chain_unavailable for callers (Solana's was a SyntaxError or a TypeError: a 500)",
      async (_name, body) => {
        const page = await proxyFor(kind, () => ({ status: 200, ...(body === undefined ? {} : { body }) }));
        try {
          const client = clientAt(kind, page.url);
          const read = () => client.getBalance(ownerOf(kind), client.config.nativeToken);
          const error = await failure(read());
          expect(error).toBeInstanceOf(ChainUnreachableError);
          // Said as it is: the node answered, with no JSON-RPC answer (it was "could not be reached").
          expect(error).toMatchObject({
            facts: { notJsonRpc: true },
            shortMessage: `The ${client.config.name} RPC endpoint answered with something that is not a JSON-RPC response`,
          });
          expect(await failure(chainCall(client.config.name, read))).toMatchObject({
            status: 502,
            reason: "chain_unavailable",
          });
        } finally {
          await page.close();
        }
      },
    );

    it("a gateway answering 503 is retried, then ChainUnreachableError with the status; a 401 is not retried", async () => {
      const busy = await proxyFor(kind, () => ({ status: 503 }));
      const denied = await proxyFor(kind, () => ({ status: 401 }));
      try {
        const busyError = await failure(
          clientAt(kind, busy.url).getBalance(ownerOf(kind), local.base.config.nativeToken),
        );
        expect(busyError).toBeInstanceOf(ChainUnreachableError);
        expect((busyError as ChainUnreachableError).facts.status).toBe(503);
        expect(busy.count(balanceMethod(kind))).toBe(4);
        const deniedError = await failure(
          clientAt(kind, denied.url).getBalance(ownerOf(kind), local.base.config.nativeToken),
        );
        expect(deniedError).toBeInstanceOf(ChainUnreachableError);
        expect((deniedError as ChainUnreachableError).facts.status).toBe(401);
        expect(denied.count(balanceMethod(kind))).toBe(1);
      } finally {
        await Promise.all([busy.close(), denied.close()]);
      }
    });
  },
);

describe.concurrent.each(["evm", "solana"] as const)("%s: a connection dropped without an answer", (kind) => {
  it("is retried on a read, which then answers as if nothing happened", async () => {
    // Solana: above the rent-exempt minimum of an account.
    const held = kind === "evm" ? 12_345n : 1_000_012_345n;
    const funded = (await fundedKey(kind, held)).address;
    const proxy = await proxyFor(kind, (method, nth) =>
      method === balanceMethod(kind) && nth <= 2 ? "drop" : "forward",
    );
    try {
      const client = clientAt(kind, proxy.url);
      expect(await client.getBalance(funded, client.config.nativeToken)).toBe(held);
      expect(proxy.count(balanceMethod(kind))).toBe(3);
    } finally {
      await proxy.close();
    }
  });

  it("is never retried on a send: ChainUnreachableError after one attempt, and nothing reached the chain", async () => {
    const sender = await fundedKey(kind, kind === "evm" ? 10n ** 18n : 10n ** 9n);
    const recipient = kind === "evm" ? evmKey().address : (await solanaKey()).address;
    const proxy = await proxyFor(kind, (method) => (method === sendMethod(kind) ? "drop" : "forward"));
    try {
      const client = clientAt(kind, proxy.url);
      const native = client.config.nativeToken;
      const signed = await signedTransfer(client, {
        privateKey: sender.privateKey,
        to: recipient,
        token: native,
        amount: 1_000n,
      });
      const error = await failure(client.broadcast(signed));
      expect(error).toBeInstanceOf(ChainUnreachableError);
      expect(proxy.count(sendMethod(kind))).toBe(1);
      const direct = kind === "evm" ? local.base : local.solana;
      expect(await direct.getBalance(recipient, native)).toBe(0n);
      expect(await direct.getTransferStatus(signed, sender.address)).toEqual({ state: "pending" });
    } finally {
      await proxy.close();
    }
  });
});

describe("refusals from the devnet", () => {
  it("evm: a transfer its sender cannot pay for is TransactionRejectedError with the node's reason", async () => {
    const sender = evmKey();
    const signed = await signedTransfer(local.base, {
      privateKey: sender.privateKey,
      to: evmKey().address,
      token: local.base.config.nativeToken,
      amount: 1n,
    });
    const error = await failure(local.base.broadcast(signed));
    expect(error).toBeInstanceOf(TransactionRejectedError);
    expect((error as TransactionRejectedError).facts).toEqual({
      chain: "base",
      method: "eth_sendRawTransaction",
      reason: "Insufficient funds for gas * price + value",
    });
  });

  it("evm: a transfer whose nonce a pending transaction holds is NonceTakenError, told from the pool, not the words", async () => {
    const sender = evmKey();
    await fundEvm(devnet, sender.address, { eth: 10n ** 18n });
    const anvil = createTestClient({ mode: "anvil", transport: http(devnet.evm.rpcUrl) });
    const eth = local.base.config.nativeToken;
    const sign = (amount: bigint) =>
      signedTransfer(local.base, {
        privateKey: sender.privateKey,
        to: evmKey().address,
        token: eth,
        amount,
        nonce: 0,
      });
    const [held, second] = await Promise.all([sign(1n), sign(2n)]);
    // No block meanwhile, not even the devnet's idle one.
    await anvil.setIntervalMining({ interval: 0 });
    await anvil.setAutomine(false);
    try {
      await local.base.broadcast(held);
      // Same nonce, same fees: the node keeps the first ("replacement transaction underpriced").
      const error = await failure(local.base.broadcast(second));
      expect(error).toBeInstanceOf(NonceTakenError);
      expect((error as NonceTakenError).facts).toEqual({
        chain: "base",
        method: "eth_sendRawTransaction",
        nonce: 0,
      });
      expect((error as NonceTakenError).cause).toBeInstanceOf(TransactionRejectedError);
    } finally {
      await anvil.setAutomine(true);
      await anvil.setIntervalMining({ interval: IDLE_BLOCK_SECONDS });
      await anvil.mine({ blocks: 1 });
    }
  });

  it("solana: a transfer from an account that does not exist is TransactionRejectedError with the node's reason", async () => {
    const sender = await solanaKey();
    const signed = await signedTransfer(local.solana, {
      privateKey: sender.privateKey,
      to: (await solanaKey()).address,
      token: local.solana.config.nativeToken,
      amount: 1n,
    });
    const error = await failure(local.solana.broadcast(signed));
    expect(error).toBeInstanceOf(TransactionRejectedError);
    expect((error as TransactionRejectedError).facts).toEqual({
      chain: "solana",
      method: "sendTransaction",
      reason:
        "Transaction simulation failed: Attempt to debit an account but found no record of a prior credit.",
    });
  });

  it.each(["evm", "solana"] as const)(
    "%s: a send answered with an error that is no refusal the node names (a gateway's timeout) is UnclearSendError, which leaves the outcome open: not TransactionRejectedError",
    async (kind) => {
      const sender = await fundedKey(kind, kind === "evm" ? 10n ** 18n : 10n ** 9n);
      const gateway = await proxyFor(kind, (method, _nth, body) => {
        if (method !== sendMethod(kind)) return "forward";
        const { id } = JSON.parse(body) as { id: unknown };
        const error = { code: -32603, message: "upstream request timed out" };
        return { status: 200, body: JSON.stringify({ jsonrpc: "2.0", id, error }) };
      });
      try {
        const client = clientAt(kind, gateway.url);
        const signed = await signedTransfer(client, {
          privateKey: sender.privateKey,
          to: kind === "evm" ? evmKey().address : (await solanaKey()).address,
          token: client.config.nativeToken,
          amount: 1_000n,
        });
        const error = await failure(client.broadcast(signed));
        expect(error).toBeInstanceOf(UnclearSendError);
        expect(error).toBeInstanceOf(ChainUnavailableError);
        expect((error as UnclearSendError).facts).toEqual({
          chain: client.config.name,
          method: sendMethod(kind),
          rpcCode: -32603,
          reason: "upstream request timed out",
        });
      } finally {
        await gateway.close();
      }
    },
  );

  it("solana: a read answered with an error kit cannot read (no data) is ChainRequestError with its code (it was a TypeError: a 500)", async () => {
    const limited = await proxyFor("solana", (method, _nth, body) => {
      if (method !== "getBalance") return "forward";
      const { id } = JSON.parse(body) as { id: unknown };
      return {
        status: 200,
        body: JSON.stringify({ jsonrpc: "2.0", id, error: { code: -32002, message: "rate limited" } }),
      };
    });
    try {
      const client = clientAt("solana", limited.url);
      const error = await failure(client.getBalance(SOLANA_OWNER, client.config.nativeToken));
      expect(error).toBeInstanceOf(ChainRequestError);
      expect((error as ChainRequestError).facts).toEqual({
        chain: "solana",
        method: "getBalance",
        rpcCode: -32002,
      });
    } finally {
      await limited.close();
    }
  });

  it.each(["evm", "solana"] as const)(
    "%s: a read the node refuses is ChainRequestError with its JSON-RPC code",
    async (kind) => {
      const client = kind === "evm" ? local.base : local.solana;
      const error = await failure(client.getIncomingTransfers("not-a-transaction-hash", []));
      expect(error).toBeInstanceOf(ChainRequestError);
      expect((error as ChainRequestError).facts).toEqual({
        chain: client.config.name,
        method: kind === "evm" ? "eth_getTransactionReceipt" : "getTransaction",
        rpcCode: -32602,
      });
    },
  );

  it("evm: a token configured at an address with no contract is ChainRequestError, and 502 chain_read_refused for callers (a wallet's balance read was a 500)", async () => {
    const token = { symbol: "USDC", address: EVM_OWNER, decimals: 6 };
    const error = await failure(local.base.getBalance(EVM_OWNER, token));
    expect(error).toBeInstanceOf(ChainRequestError);
    expect((error as ChainRequestError).facts).toEqual({ chain: "base", method: "eth_call" });
    const wrapped = await failure(chainCall("base", () => local.base.getBalance(EVM_OWNER, token)));
    expect(wrapped).toBeInstanceOf(AppError);
    expect(wrapped).toMatchObject({
      status: 502,
      reason: "chain_read_refused",
      message: "The base node refused eth_call",
      details: { chain: "base", method: "eth_call" },
    });
  });
});
