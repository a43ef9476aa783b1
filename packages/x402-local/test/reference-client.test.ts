/**
 * The harness against the reference payer: `@x402/core`'s client with the `exact` client schemes of
 * `@x402/evm` and `@x402/svm` pays the harness's resource servers, the harness's facilitator settles on the
 * devnet, and the balances move by exactly the price. This shows the harness is a faithful reference
 * before Svc's own payer is tested against it.
 */
import { randomBytes } from "node:crypto";
import {
  createKeyPairSignerFromPrivateKeyBytes,
  createSolanaRpc,
  generateKeyPairSigner,
  type KeyPairSigner,
  address as toAddress,
} from "@solana/kit";
import { findAssociatedTokenPda, TOKEN_PROGRAM_ADDRESS } from "@solana-program/token";
import { type Devnet, fundEvm, fundSolana, startDevnet } from "@svc/devnet";
import { x402Client, x402HTTPClient } from "@x402/core/client";
import { ExactEvmScheme } from "@x402/evm/exact/client";
import { ExactEvmSchemeV1 } from "@x402/evm/exact/v1/client";
import { ExactSvmScheme } from "@x402/svm/exact/client";
import { ExactSvmSchemeV1 } from "@x402/svm/exact/v1/client";
import { createPublicClient, erc20Abi, http } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createUsdcAccount,
  evmNetwork,
  type LocalFacilitator,
  type ResourceServer,
  SOLANA_DEVNET_NETWORK,
  startLocalFacilitator,
  startResourceServerV1,
  startResourceServerV2,
} from "../src/index.ts";

const PRICE = 10_000n; // 0.01 USDC
const WEATHER = { forecast: "sunny", celsius: 21 };

interface Payers {
  evm: ReturnType<typeof privateKeyToAccount>;
  solana: KeyPairSigner;
}

async function fundedPayers(devnet: Devnet): Promise<Payers> {
  const evm = privateKeyToAccount(`0x${randomBytes(32).toString("hex")}`);
  const solana = await createKeyPairSignerFromPrivateKeyBytes(randomBytes(32));
  // The payers hold USDC only: gas and fees are the facilitator's.
  await fundEvm(devnet, evm.address, { usdc: 1_000_000n });
  await fundSolana(devnet, solana.address, { usdc: 1_000_000n });
  return { evm, solana };
}

async function evmUsdc(devnet: Devnet, owner: `0x${string}`): Promise<bigint> {
  const client = createPublicClient({ transport: http(devnet.evm.rpcUrl) });
  return client.readContract({
    address: devnet.evm.usdc,
    abi: erc20Abi,
    functionName: "balanceOf",
    args: [owner],
  });
}

async function solanaUsdc(devnet: Devnet, owner: string): Promise<bigint> {
  const [ata] = await findAssociatedTokenPda({
    owner: toAddress(owner),
    mint: toAddress(devnet.solana.usdcMint),
    tokenProgram: TOKEN_PROGRAM_ADDRESS,
  });
  const { value } = await createSolanaRpc(devnet.solana.rpcUrl).getTokenAccountBalance(ata).send();
  return BigInt(value.amount);
}

/** Pays `url` with the reference client as `@x402/fetch` does: probe, 402, sign, retry once. */
async function payWithReferenceClient(client: x402HTTPClient, url: string) {
  const challenge = await fetch(url, { headers: { accept: "application/json" } });
  expect(challenge.status).toBe(402);
  const paymentRequired = client.getPaymentRequiredResponse(
    (name) => challenge.headers.get(name),
    await challenge.json().catch(() => undefined),
  );
  const payload = await client.createPaymentPayload(paymentRequired);
  const paid = await fetch(url, { headers: { ...client.encodePaymentSignatureHeader(payload) } });
  return {
    paymentRequired,
    status: paid.status,
    body: await paid.json(),
    receipt: client.getPaymentSettleResponse((name) => paid.headers.get(name)),
  };
}

describe("the harness on the default devnet (EVM chain 31337), v2", () => {
  let devnet: Devnet;
  let facilitator: LocalFacilitator;
  let server: ResourceServer;
  let payers: Payers;
  const evmPayTo = privateKeyToAccount(`0x${randomBytes(32).toString("hex")}`).address;
  let solanaPayTo: string;

  beforeAll(async () => {
    devnet = await startDevnet();
    facilitator = await startLocalFacilitator(devnet);
    solanaPayTo = (await generateKeyPairSigner()).address;
    await createUsdcAccount(devnet, solanaPayTo);
    payers = await fundedPayers(devnet);
    server = await startResourceServerV2(facilitator.url, [
      {
        path: "/weather/evm",
        accepts: [
          {
            network: evmNetwork(devnet.evm.chainId),
            payTo: evmPayTo,
            amount: String(PRICE),
            asset: devnet.evm.usdc,
            extra: devnet.evm.usdcEip712,
          },
        ],
        body: WEATHER,
      },
      {
        path: "/weather/solana",
        accepts: [
          {
            network: SOLANA_DEVNET_NETWORK,
            payTo: solanaPayTo,
            amount: String(PRICE),
            asset: devnet.solana.usdcMint,
          },
        ],
        body: WEATHER,
      },
    ]);
  });

  afterAll(async () => {
    await server?.stop();
    await facilitator?.stop();
    await devnet?.stop();
  });

  it("lists what it settles at GET /supported, with the Solana fee payer", async () => {
    const supported = (await (await fetch(`${facilitator.url}/supported`)).json()) as {
      kinds: { x402Version: number; scheme: string; network: string; extra?: { feePayer?: string } }[];
    };
    expect(supported.kinds).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ x402Version: 2, scheme: "exact", network: "eip155:31337" }),
        expect.objectContaining({
          x402Version: 2,
          scheme: "exact",
          network: SOLANA_DEVNET_NETWORK,
          extra: expect.objectContaining({ feePayer: facilitator.solanaFeePayer }),
        }),
      ]),
    );
  });

  it("is paid on EVM by the reference client; the payee gains exactly the price", async () => {
    const client = new x402HTTPClient(
      new x402Client()
        .register("eip155:*", new ExactEvmScheme(payers.evm))
        .setSpendControls({ allowedAssets: true }),
    );
    const before = {
      payer: await evmUsdc(devnet, payers.evm.address),
      payee: await evmUsdc(devnet, evmPayTo),
    };
    const result = await payWithReferenceClient(client, `${server.url}/weather/evm`);
    expect(result.status).toBe(200);
    expect(result.body).toEqual(WEATHER);
    expect(result.receipt).toMatchObject({
      success: true,
      network: "eip155:31337",
      payer: payers.evm.address,
    });
    expect(await evmUsdc(devnet, payers.evm.address)).toBe(before.payer - PRICE);
    expect(await evmUsdc(devnet, evmPayTo)).toBe(before.payee + PRICE);
    const receipt = await createPublicClient({ transport: http(devnet.evm.rpcUrl) }).getTransactionReceipt({
      hash: result.receipt.transaction as `0x${string}`,
    });
    expect(receipt.status).toBe("success");
    expect(receipt.from.toLowerCase()).toBe(facilitator.evmAddress.toLowerCase());
  });

  it("is paid on Solana by the reference client; the fee payer is the facilitator's", async () => {
    const client = new x402HTTPClient(
      new x402Client()
        .register(SOLANA_DEVNET_NETWORK, new ExactSvmScheme(payers.solana, { rpcUrl: devnet.solana.rpcUrl }))
        .setSpendControls({ allowedAssets: true }),
    );
    const before = {
      payer: await solanaUsdc(devnet, payers.solana.address),
      payee: await solanaUsdc(devnet, solanaPayTo),
    };
    const result = await payWithReferenceClient(client, `${server.url}/weather/solana`);
    expect(result.paymentRequired.accepts[0]?.extra).toMatchObject({ feePayer: facilitator.solanaFeePayer });
    expect(result.status).toBe(200);
    expect(result.body).toEqual(WEATHER);
    expect(result.receipt).toMatchObject({ success: true, network: SOLANA_DEVNET_NETWORK });
    expect(await solanaUsdc(devnet, payers.solana.address)).toBe(before.payer - PRICE);
    expect(await solanaUsdc(devnet, solanaPayTo)).toBe(before.payee + PRICE);
    const { value } = await createSolanaRpc(devnet.solana.rpcUrl)
      .getSignatureStatuses([result.receipt.transaction as never])
      .send();
    expect(value[0]?.err).toBeNull();
  });
});

describe("the harness on an EVM chain with Base Sepolia's id (84532), v1", () => {
  let devnet: Devnet;
  let facilitator: LocalFacilitator;
  let server: ResourceServer;
  let payers: Payers;
  const evmPayTo = privateKeyToAccount(`0x${randomBytes(32).toString("hex")}`).address;
  let solanaPayTo: string;

  beforeAll(async () => {
    devnet = await startDevnet({ evmChainId: 84532 });
    facilitator = await startLocalFacilitator(devnet);
    solanaPayTo = (await generateKeyPairSigner()).address;
    await createUsdcAccount(devnet, solanaPayTo);
    payers = await fundedPayers(devnet);
    server = await startResourceServerV1(facilitator.url, [
      {
        path: "/weather/evm",
        network: "base-sepolia",
        payTo: evmPayTo,
        amount: String(PRICE),
        asset: { address: devnet.evm.usdc, decimals: 6, eip712: devnet.evm.usdcEip712 },
        body: WEATHER,
      },
      {
        path: "/weather/solana",
        network: "solana-devnet",
        payTo: solanaPayTo,
        amount: String(PRICE),
        asset: { address: devnet.solana.usdcMint, decimals: 6 },
        body: WEATHER,
      },
    ]);
  });

  afterAll(async () => {
    await server?.stop();
    await facilitator?.stop();
    await devnet?.stop();
  });

  it("settles v1 under the v1 names", () => {
    expect(facilitator.networks.v1).toEqual(["base-sepolia", "solana-devnet"]);
  });

  it("is paid on EVM (base-sepolia) by the reference v1 client", async () => {
    const client = new x402HTTPClient(
      new x402Client()
        .registerV1("base-sepolia", new ExactEvmSchemeV1(payers.evm))
        .setSpendControls({ allowedAssets: true }),
    );
    const before = await evmUsdc(devnet, evmPayTo);
    const result = await payWithReferenceClient(client, `${server.url}/weather/evm`);
    expect(result.paymentRequired.x402Version).toBe(1);
    expect(result.status).toBe(200);
    expect(result.body).toEqual(WEATHER);
    expect(result.receipt).toMatchObject({ success: true, network: "base-sepolia" });
    expect(await evmUsdc(devnet, evmPayTo)).toBe(before + PRICE);
  });

  it("is paid on Solana (solana-devnet) by the reference v1 client", async () => {
    const client = new x402HTTPClient(
      new x402Client()
        .registerV1("solana-devnet", new ExactSvmSchemeV1(payers.solana, { rpcUrl: devnet.solana.rpcUrl }))
        .setSpendControls({ allowedAssets: true }),
    );
    const before = await solanaUsdc(devnet, solanaPayTo);
    const result = await payWithReferenceClient(client, `${server.url}/weather/solana`);
    expect(result.status).toBe(200);
    expect(result.receipt).toMatchObject({ success: true, network: "solana-devnet" });
    expect(await solanaUsdc(devnet, solanaPayTo)).toBe(before + PRICE);
  });
});
