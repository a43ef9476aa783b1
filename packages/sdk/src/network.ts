import { SvcValidationError } from "./errors.ts";
import type { Transport } from "./transport.ts";
import type { Chain } from "./types.ts";

/**
 * What a spend needs to know about its chain and token, all read from the service's `GET /v1/chains`
 * (never from constants in the SDK).
 * @example
 * const facts: TokenFacts = { chain: "base", network: "eip155:8453", symbol: "USDC", asset: "0x8335…", decimals: 6, usdPrice: "1", native: false };
 */
export interface TokenFacts {
  /** Chain name. */
  chain: string;
  /** CAIP-2 network id. */
  network: string;
  symbol: string;
  /** Token contract or mint address; for the native coin, {@link NATIVE_ASSET}. */
  asset: string;
  decimals: number;
  usdPrice: string | undefined;
  native: boolean;
}

/**
 * The `asset` the gate names for a chain's native coin (ETH, SOL), which has no token address. The service
 * verifying a decision compares the same word.
 * @example
 * const asset = token.native ? NATIVE_ASSET : token.address; // "native" for ETH / SOL
 */
export const NATIVE_ASSET = "native";

function unknown(reason: string, message: string): SvcValidationError {
  return new SvcValidationError({ code: "ValidationError", status: 0, message, reason });
}

/** The deployment's chains, read once per client (and again when a name is not found). */
export class NetworkDirectory {
  #chains: Promise<Chain[]> | undefined;

  constructor(private readonly transport: Transport) {}

  /** The chains, from the cache unless `refresh`. */
  list(refresh = false): Promise<Chain[]> {
    if (refresh || this.#chains === undefined) {
      const loading = this.transport.request<Chain[]>({ method: "GET", path: "/chains", idempotent: true });
      this.#chains = loading;
      // A failed read is not kept.
      loading.catch(() => {
        if (this.#chains === loading) this.#chains = undefined;
      });
    }
    return this.#chains;
  }

  /** The facts of `symbol` on `chain`; throws {@link SvcValidationError} (no request) when either is unknown. */
  async resolve(chainName: string, symbol: string): Promise<TokenFacts> {
    let chains = await this.list();
    let chain = chains.find((candidate) => candidate.name === chainName);
    if (chain === undefined) {
      chains = await this.list(true);
      chain = chains.find((candidate) => candidate.name === chainName);
    }
    if (chain === undefined) {
      throw unknown(
        "unknown_chain",
        `Unknown chain ${JSON.stringify(chainName)}; this deployment serves ${chains.map((c) => c.name).join(", ")}`,
      );
    }
    const token = chain.tokens.find((candidate) => candidate.symbol === symbol);
    if (token !== undefined) {
      return {
        chain: chain.name,
        network: chain.network,
        symbol: token.symbol,
        asset: token.address,
        decimals: token.decimals,
        usdPrice: token.usdPrice,
        native: false,
      };
    }
    if (chain.nativeToken.symbol === symbol) {
      return {
        chain: chain.name,
        network: chain.network,
        symbol,
        asset: NATIVE_ASSET,
        decimals: chain.nativeToken.decimals,
        usdPrice: chain.nativeToken.usdPrice,
        native: true,
      };
    }
    const served = [chain.nativeToken.symbol, ...chain.tokens.map((t) => t.symbol)];
    throw unknown(
      "unknown_token",
      `Token ${JSON.stringify(symbol)} is not served on ${chain.name}; tokens: ${served.join(", ")}`,
    );
  }
}
