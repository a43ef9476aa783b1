import { chainCall } from "../chains/errors.ts";
import type { ChainRegistry } from "../chains/registry.ts";
import type { TokenInfo } from "../chains/types.ts";
import type { Db } from "../internal/db/store.ts";
import { formatUnits, formatUsd, parseUnitsStrict, USD_DECIMALS } from "../internal/money.ts";
import { findWalletForAccount } from "./wallets.ts";

/** One token balance of a wallet on one chain. */
export interface BalanceLine {
  chain: string;
  token: string;
  /** Decimal string in whole tokens. */
  amount: string;
  /** Dollars in the API's one format ({@link formatUsd}), rounded down to the micro-dollar; null without a price. */
  usdValue: string | null;
}

/** `GET /v1/wallets/:id/balance`. */
export interface WalletBalances {
  walletId: string;
  balances: BalanceLine[];
  /** The sum of the `usdValue`s that are known; balances without a price are not counted. */
  totalUsdValue: string;
  updatedAt: string;
}

/**
 * Reads the native coin and every token of each of the wallet's chains from the chains themselves, all at
 * once, and values them exactly: stablecoins 1:1, native coins at the configured price, no value (null)
 * where no price is known.
 * @example const { balances, totalUsdValue } = await getWalletBalances({ db, chains }, accountId, walletId);
 */
export async function getWalletBalances(
  deps: { db: Db; chains: ChainRegistry },
  accountId: string,
  walletId: string,
): Promise<WalletBalances> {
  const wallet = await findWalletForAccount(deps.db, accountId, walletId);
  const reads: Promise<{ chain: string; token: TokenInfo; atomic: bigint }>[] = [];
  for (const chain of wallet.chains) {
    const client = deps.chains.client(chain);
    if (!client) continue; // a chain the deployment no longer serves has no balance to show
    const owner = client.config.kind === "evm" ? wallet.evmAddress : wallet.solanaAddress;
    if (!owner) continue;
    for (const token of [client.config.nativeToken, ...client.config.tokens]) {
      reads.push(
        chainCall(chain, () => client.getBalance(owner, token)).then((atomic) => ({ chain, token, atomic })),
      );
    }
  }
  const results = await Promise.all(reads);
  let total = 0n;
  const balances = results.map(({ chain, token, atomic }) => {
    const micros = usdMicrosFloor(token, atomic);
    if (micros !== undefined) total += micros;
    return {
      chain,
      token: token.symbol,
      amount: formatUnits(atomic, token.decimals),
      usdValue: micros === undefined ? null : formatUsd(micros),
    };
  });
  return {
    walletId: wallet.id,
    balances,
    totalUsdValue: formatUsd(total),
    updatedAt: new Date().toISOString(),
  };
}

/** The value of a holding in micro-dollars, rounded down (what it is worth at most, never more). */
function usdMicrosFloor(token: TokenInfo, atomic: bigint): bigint | undefined {
  if (token.usdPrice === undefined) return undefined;
  const price = parseUnitsStrict(token.usdPrice, USD_DECIMALS);
  if (price === undefined) return undefined;
  return (atomic * price) / 10n ** BigInt(token.decimals);
}
