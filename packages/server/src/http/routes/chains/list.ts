import { z } from "zod";
import { jsonResponse } from "../../schemas.ts";
import type { App, Services } from "../../types.ts";

const usdPrice = z
  .string()
  .meta({ description: "USD per whole token, decimal; absent when no price is known", example: "1" });

const chainView = z
  .object({
    name: z.string().meta({ example: "base" }),
    kind: z.enum(["evm", "solana"]),
    network: z.string().meta({ description: "CAIP-2 network id", example: "eip155:8453" }),
    nativeToken: z.object({ symbol: z.string(), decimals: z.number().int(), usdPrice: usdPrice.optional() }),
    tokens: z.array(
      z.object({
        symbol: z.string(),
        address: z.string().meta({ description: "ERC-20 contract (EVM) or SPL mint (Solana)" }),
        decimals: z.number().int(),
        usdPrice: usdPrice.optional(),
        eip712: z.object({ name: z.string(), version: z.string() }).optional(),
      }),
    ),
    testnet: z.boolean().meta({ description: "a local or test network: the faucet is offered here" }),
  })
  .meta({
    id: "Chain",
    example: {
      name: "base",
      kind: "evm",
      network: "eip155:8453",
      nativeToken: { symbol: "ETH", decimals: 18, usdPrice: "3000" },
      tokens: [
        {
          symbol: "USDC",
          address: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
          decimals: 6,
          usdPrice: "1",
          eip712: { name: "USD Coin", version: "2" },
        },
      ],
      testnet: false,
    },
  });

/** GET /v1/chains: the chains and tokens this deployment serves (clients read addresses from here). */
export function registerListChains(app: App, services: Services): void {
  app.route({
    method: "GET",
    url: "/v1/chains",
    config: { auth: "account", role: "read" },
    schema: {
      operationId: "listChains",
      tags: ["chains"],
      summary: "The chains and tokens this deployment serves",
      response: { 200: jsonResponse("The served chains", z.array(chainView)) },
    },
    // RPC URLs are configuration (and often hold a provider key): never shown.
    handler: async () =>
      services.chains.list().map((chain) => ({
        name: chain.name,
        kind: chain.kind,
        network: chain.network,
        nativeToken: {
          symbol: chain.nativeToken.symbol,
          decimals: chain.nativeToken.decimals,
          ...(chain.nativeToken.usdPrice !== undefined ? { usdPrice: chain.nativeToken.usdPrice } : {}),
        },
        tokens: chain.tokens.map((token) => ({
          symbol: token.symbol,
          address: token.address ?? "",
          decimals: token.decimals,
          ...(token.usdPrice !== undefined ? { usdPrice: token.usdPrice } : {}),
          ...(token.eip712 ? { eip712: token.eip712 } : {}),
        })),
        testnet: chain.testnet,
      })),
  });
}
