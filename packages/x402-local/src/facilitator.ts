import type { AddressInfo } from "node:net";
import { generateKeyPairSigner } from "@solana/kit";
import { type EvmFundingSource, fundEvm, fundSolana, type SolanaFundingSource } from "@svc/devnet";
import { x402Facilitator } from "@x402/core/facilitator";
import type { PaymentPayload, PaymentRequirements, SettleResponse } from "@x402/core/types";
import { toFacilitatorEvmSigner } from "@x402/evm";
import { ExactEvmScheme } from "@x402/evm/exact/facilitator";
import { ExactEvmSchemeV1 } from "@x402/evm/exact/v1/facilitator";
import { toFacilitatorSvmSigner } from "@x402/svm";
import { ExactSvmScheme } from "@x402/svm/exact/facilitator";
import { ExactSvmSchemeV1 } from "@x402/svm/exact/v1/facilitator";
import express from "express";
import { createWalletClient, defineChain, type Hex, http, publicActions } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { EVM_V1_NAMES, evmNetwork, SOLANA_DEVNET_NETWORK, SOLANA_DEVNET_V1_NAME } from "./networks.ts";

/** The devnet facts the facilitator needs: what `startDevnet()` returns, or the JSON `svc-devnet` prints. */
export type FacilitatorDevnet = EvmFundingSource & SolanaFundingSource;

/** Options for {@link startLocalFacilitator}. */
export interface LocalFacilitatorOptions {
  /** Port on 127.0.0.1; default 0 (a free port). */
  readonly port?: number;
  /**
   * Called after each settlement and awaited before the answer is sent: a test can hold the answer back
   * (a facilitator that times out after settling) or observe settlements as they happen.
   */
  readonly onSettled?: (settlement: FacilitatorSettlement) => void | Promise<void>;
  /**
   * Serve the Bazaar discovery endpoint, `GET /discovery/resources`, listing what {@link
   * LocalFacilitator.listResource} was given. Default true; false answers 404 there, as a facilitator
   * without discovery does.
   */
  readonly discovery?: boolean;
}

/** A payable resource in the discovery list, as the Bazaar extension's `/discovery/resources` lists it. */
export interface DiscoverableResource {
  /** The URL a client fetches. */
  readonly resource: string;
  /** Default "http". */
  readonly type?: string;
  readonly x402Version: 1 | 2;
  /** The payment requirements, as the resource's challenge states them. */
  readonly accepts: readonly Record<string, unknown>[];
  readonly description?: string;
  readonly mimeType?: string;
  readonly serviceName?: string;
  readonly tags?: readonly string[];
}

/** One settle call the facilitator answered, as it answered it. */
export interface FacilitatorSettlement {
  readonly x402Version: number;
  readonly network: string;
  readonly success: boolean;
  /** Transaction hash (EVM) or signature (Solana); empty when nothing was sent. */
  readonly transaction: string;
  readonly payer: string | undefined;
  readonly errorReason: string | undefined;
}

/** A running local facilitator. */
export interface LocalFacilitator {
  /** `http://127.0.0.1:<port>`: resource servers post to `${url}/verify` and `${url}/settle`. */
  readonly url: string;
  /** The account that pays gas for EVM settlements (funded with ETH on the devnet). */
  readonly evmAddress: `0x${string}`;
  /** The Solana fee payer: challenges carry it as `extra.feePayer`. */
  readonly solanaFeePayer: string;
  /** CAIP-2 ids and v1 names the facilitator settles, as `GET /supported` lists them. */
  readonly networks: { readonly evm: string; readonly solana: string; readonly v1: readonly string[] };
  /** Every settle call answered so far, oldest first. */
  readonly settlements: readonly FacilitatorSettlement[];
  /** Adds a resource to the discovery list (`GET /discovery/resources`), newest last. */
  listResource(resource: DiscoverableResource): void;
  /** Stops the HTTP server. Safe to call twice. */
  stop(): Promise<void>;
}

/** ETH and SOL given to the facilitator's fresh accounts: gas for many settlements. */
const FACILITATOR_ETH = 10n ** 18n;
const FACILITATOR_LAMPORTS = 10n * 10n ** 9n;

/**
 * Starts the x402 reference facilitator (`@x402/core`'s `x402Facilitator` with `@x402/evm`'s and
 * `@x402/svm`'s `exact` schemes) on 127.0.0.1, settling on the devnet from fresh accounts funded by the
 * devnet's treasuries. It answers `POST /verify`, `POST /settle` and `GET /supported` as a public facilitator
 * does, and `GET /discovery/resources` (the Bazaar extension's list) with what `listResource` was given.
 *
 * Networks: EVM v2 as `eip155:<devnet chain id>`; EVM v1 under the v1 name of that chain id when it has one
 * (84532: `base-sepolia`); Solana v2 as Solana devnet's CAIP-2 id and v1 as `solana-devnet`, both over the
 * devnet's Solana RPC (the only Solana ids `@x402/svm` accepts; see {@link SOLANA_DEVNET_NETWORK}).
 *
 * @example
 * ```ts
 * const devnet = await startDevnet();
 * const facilitator = await startLocalFacilitator(devnet);
 * await fetch(`${facilitator.url}/supported`).then((r) => r.json()); // { kinds: [...], signers: {...} }
 * await facilitator.stop();
 * ```
 */
export async function startLocalFacilitator(
  devnet: FacilitatorDevnet,
  options: LocalFacilitatorOptions = {},
): Promise<LocalFacilitator> {
  const evmKey = generatePrivateKey();
  const evmAccount = privateKeyToAccount(evmKey);
  const feePayer = await generateKeyPairSigner();
  await Promise.all([
    fundEvm(devnet, evmAccount.address, { eth: FACILITATOR_ETH }),
    fundSolana(devnet, feePayer.address, { sol: FACILITATOR_LAMPORTS }),
  ]);

  const facilitator = new x402Facilitator();
  const evmSigner = evmFacilitatorSigner(devnet.evm.rpcUrl, devnet.evm.chainId, evmKey);
  const evm = evmNetwork(devnet.evm.chainId);
  facilitator.register(evm, new ExactEvmScheme(evmSigner));
  const v1: string[] = [];
  const evmV1Name = EVM_V1_NAMES[devnet.evm.chainId];
  if (evmV1Name !== undefined) {
    // v1 signatures name the chain by its v1 name; only a chain with that id can settle them.
    facilitator.registerV1(evmV1Name as never, new ExactEvmSchemeV1(evmSigner));
    v1.push(evmV1Name);
  }
  // Every Solana id the facilitator is asked about (v2's CAIP-2 id and v1's name alike) is the devnet's
  // RPC. (Given one kit RPC instead, toFacilitatorSvmSigner misreads that Proxy as a per-network map; a map
  // keyed by the CAIP-2 id alone sends v1 settlements to the public devnet.)
  const svmSigner = toFacilitatorSvmSigner(feePayer, { defaultRpcUrl: devnet.solana.rpcUrl });
  facilitator.register(SOLANA_DEVNET_NETWORK, new ExactSvmScheme(svmSigner));
  facilitator.registerV1(SOLANA_DEVNET_V1_NAME as never, new ExactSvmSchemeV1(svmSigner));
  v1.push(SOLANA_DEVNET_V1_NAME);

  const settlements: FacilitatorSettlement[] = [];
  // One settlement at a time: the reference EVM signer reads its account's nonce per transaction, so
  // concurrent settlements from the one account would collide (`invalid_exact_evm_transaction_failed`).
  let settling: Promise<unknown> = Promise.resolve();
  const settleInTurn = (payload: PaymentPayload, requirements: PaymentRequirements) => {
    const turn = settling.then(() => facilitator.settle(payload, requirements));
    settling = turn.catch(() => undefined);
    return turn;
  };
  const discoverable: (DiscoverableResource & { type: string; lastUpdated: string })[] = [];
  const app = express();
  app.use(express.json({ limit: "1mb" }));
  if (options.discovery !== false) {
    app.get("/discovery/resources", (req, res) => {
      const type = typeof req.query.type === "string" ? req.query.type : undefined;
      const limit = Math.min(Math.max(Number(req.query.limit) || 100, 1), 1000);
      const offset = Math.max(Number(req.query.offset) || 0, 0);
      const matching = discoverable.filter((item) => type === undefined || item.type === type);
      res.json({
        x402Version: 2,
        items: matching.slice(offset, offset + limit),
        pagination: { limit, offset, total: matching.length },
      });
    });
  }
  app.get("/supported", (_req, res) => {
    res.json(facilitator.getSupported());
  });
  app.post("/verify", async (req, res) => {
    const body = paymentBody(req.body);
    if (!body) {
      res.status(400).json({ error: "Missing paymentPayload or paymentRequirements" });
      return;
    }
    try {
      res.json(await facilitator.verify(body.paymentPayload, body.paymentRequirements));
    } catch (error) {
      res.status(500).json({ error: error instanceof Error ? error.message : String(error) });
    }
  });
  app.post("/settle", async (req, res) => {
    const body = paymentBody(req.body);
    if (!body) {
      res.status(400).json({ error: "Missing paymentPayload or paymentRequirements" });
      return;
    }
    let result: SettleResponse;
    try {
      result = await settleInTurn(body.paymentPayload, body.paymentRequirements);
    } catch (error) {
      res.status(500).json({ error: error instanceof Error ? error.message : String(error) });
      return;
    }
    const settlement: FacilitatorSettlement = {
      x402Version: body.paymentPayload.x402Version,
      network: String(result.network),
      success: result.success,
      transaction: result.transaction,
      payer: result.payer,
      errorReason: result.errorReason,
    };
    settlements.push(settlement);
    await options.onSettled?.(settlement);
    res.json(result);
  });

  const server = app.listen(options.port ?? 0, "127.0.0.1");
  await new Promise<void>((resolve, reject) => {
    server.once("listening", resolve);
    server.once("error", reject);
  });
  const { port } = server.address() as AddressInfo;
  let stopping: Promise<void> | undefined;
  return {
    url: `http://127.0.0.1:${port}`,
    evmAddress: evmAccount.address,
    solanaFeePayer: feePayer.address,
    networks: { evm, solana: SOLANA_DEVNET_NETWORK, v1 },
    settlements,
    listResource(resource) {
      discoverable.push({ type: "http", ...resource, lastUpdated: new Date().toISOString() });
    },
    stop() {
      stopping ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return stopping;
    },
  };
}

/** `{ paymentPayload, paymentRequirements }` of a verify or settle body, or undefined when either is missing. */
function paymentBody(
  body: unknown,
): { paymentPayload: PaymentPayload; paymentRequirements: PaymentRequirements } | undefined {
  if (typeof body !== "object" || body === null) return undefined;
  const { paymentPayload, paymentRequirements } = body as Record<string, unknown>;
  if (typeof paymentPayload !== "object" || paymentPayload === null) return undefined;
  if (typeof paymentRequirements !== "object" || paymentRequirements === null) return undefined;
  return {
    paymentPayload: paymentPayload as PaymentPayload,
    paymentRequirements: paymentRequirements as PaymentRequirements,
  };
}

/** The reference EVM facilitator signer over a viem wallet on the local node. */
function evmFacilitatorSigner(rpcUrl: string, chainId: number, privateKey: Hex) {
  const account = privateKeyToAccount(privateKey);
  const client = createWalletClient({
    account,
    chain: defineChain({
      id: chainId,
      name: "Svc devnet (anvil)",
      nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
      rpcUrls: { default: { http: [rpcUrl] } },
    }),
    transport: http(rpcUrl),
    // anvil mines each transaction at once: poll for receipts quickly.
    pollingInterval: 25,
  }).extend(publicActions);
  return toFacilitatorEvmSigner({
    address: account.address,
    getCode: (args) => client.getCode(args),
    readContract: (args) => client.readContract({ ...args, args: args.args ?? [] } as never),
    verifyTypedData: (args) => client.verifyTypedData(args as never),
    writeContract: (args) => client.writeContract({ ...args, args: args.args ?? [] } as never),
    sendTransaction: (args) => client.sendTransaction(args),
    waitForTransactionReceipt: (args) => client.waitForTransactionReceipt(args),
  });
}
