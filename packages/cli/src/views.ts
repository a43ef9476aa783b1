import type { ApiKey, Balance, Policy, Transaction, WalletRecord } from "@svc/sdk";
import { fields, table, tokenAmount, usd, when } from "./output.ts";

/**
 * A wallet's record, one field per line.
 * @example
 * console.log(walletView(wallet));
 */
export function walletView(wallet: WalletRecord): string {
  const pairs: [string, string][] = [
    ["id", wallet.id],
    ["name", wallet.name],
    ["status", wallet.status],
    ["chains", wallet.chains.join(", ")],
  ];
  if (wallet.evm) pairs.push(["evm address", wallet.evm.address]);
  if (wallet.solana) pairs.push(["solana address", wallet.solana.address]);
  if (Object.keys(wallet.metadata).length > 0) pairs.push(["metadata", JSON.stringify(wallet.metadata)]);
  pairs.push(["created", when(wallet.createdAt)]);
  return fields(pairs);
}

/**
 * Wallets as a table, newest first as the service lists them.
 * @example
 * console.log(walletTable(wallets));
 */
export function walletTable(wallets: WalletRecord[]): string {
  if (wallets.length === 0) return "No wallets yet: svc wallets create <name> --chains base";
  return table(
    [
      { heading: "ID" },
      { heading: "NAME" },
      { heading: "CHAINS" },
      { heading: "STATUS" },
      { heading: "CREATED" },
    ],
    wallets.map((w) => [w.id, w.name, w.chains.join(","), w.status, when(w.createdAt)]),
  );
}

/**
 * A policy, one bound per line, in dollars.
 * @example
 * console.log(policyView(await wallet.policy.get()));
 */
export function policyView(policy: Policy): string {
  return fields([
    ["wallet", policy.walletId],
    ["status", policy.status],
    ["max per transaction", usd(policy.maxPerTx)],
    ["daily limit", usd(policy.dailyLimit)],
    ["alert above", usd(policy.alertAbove)],
    ["approval above", usd(policy.approvalAbove)],
    ["whitelist", policy.whitelist.length === 0 ? "any recipient" : policy.whitelist.join(", ")],
    ["spend authorization", policy.requireSpendAuthorization ? "required" : "not required"],
    ["updated", when(policy.updatedAt)],
  ]);
}

/**
 * Balances as a table with a total line.
 * @example
 * console.log(balanceView(await wallet.balance()));
 */
export function balanceView(balance: Balance): string {
  const rows = balance.balances.map((b) => [
    b.chain,
    b.token,
    b.amount,
    b.usdValue === null ? "—" : usd(b.usdValue),
  ]);
  return [
    table(
      [
        { heading: "CHAIN" },
        { heading: "TOKEN" },
        { heading: "AMOUNT", align: "right" },
        { heading: "USD", align: "right" },
      ],
      rows,
    ),
    `Total ${usd(balance.totalUsdValue)}`,
  ].join("\n");
}

/**
 * One transaction, one field per line; a spend that landed with the fee it paid in the chain's native coin.
 * @example
 * console.log(transactionView(tx));
 */
export function transactionView(tx: Transaction): string {
  const pairs: [string, string][] = [
    ["transaction", tx.id],
    ["status", tx.failureReason ? `${tx.status} (${tx.failureReason})` : tx.status],
    ["type", tx.type],
    ["amount", tokenAmount(tx.amount, tx.token)],
  ];
  if (tx.fee) pairs.push(["fee", tokenAmount(tx.fee.amount, tx.fee.token)]);
  pairs.push(["chain", tx.chain], ["from", tx.from], ["to", tx.to]);
  if (tx.resource) pairs.push(["resource", tx.resource]);
  if (tx.txHash) pairs.push(["hash", tx.txHash]);
  pairs.push(["time", when(tx.timestamp)]);
  if (tx.confirmedAt) pairs.push(["confirmed", when(tx.confirmedAt)]);
  return fields(pairs);
}

/**
 * One line for a spend that ended other than confirmed: why, and the fee it paid if it landed (a send
 * that failed on chain still paid its network fee).
 * @example
 * unconfirmedLine(tx); // "tx_… failed on base: reverted; it paid a fee of 0.000042 ETH"
 */
export function unconfirmedLine(tx: Transaction): string {
  const reason = tx.failureReason ? `: ${tx.failureReason}` : "";
  const fee = tx.fee ? `; it paid a fee of ${tokenAmount(tx.fee.amount, tx.fee.token)}` : "";
  return `${tx.id} ${tx.status} on ${tx.chain}${reason}${fee}`;
}

/**
 * Transactions as a table: what left the wallet is negative, what came in positive; a spend that landed
 * with the fee it paid beside its amount (empty where none is stated).
 * @example
 * console.log(transactionTable(page.data));
 */
export function transactionTable(transactions: Transaction[]): string {
  return table(
    [
      { heading: "TIME" },
      { heading: "TYPE" },
      { heading: "STATUS" },
      { heading: "AMOUNT", align: "right" },
      { heading: "FEE", align: "right" },
      { heading: "CHAIN" },
      { heading: "COUNTERPARTY" },
      { heading: "ID" },
    ],
    transactions.map((tx) => [
      when(tx.timestamp),
      tx.type,
      tx.status,
      `${tx.type === "receive" ? "+" : "-"}${tokenAmount(tx.amount, tx.token)}`,
      tx.fee ? tokenAmount(tx.fee.amount, tx.fee.token) : "",
      tx.chain,
      tx.type === "receive" ? tx.from : (tx.resource ?? tx.to),
      tx.id,
    ]),
  );
}

/**
 * API keys as a table (never their values).
 * @example
 * console.log(keyTable(await svc.apiKeys.list()));
 */
export function keyTable(keys: ApiKey[]): string {
  return table(
    [
      { heading: "ID" },
      { heading: "NAME" },
      { heading: "ROLE" },
      { heading: "WALLETS" },
      { heading: "EXPIRES" },
      { heading: "LAST USED" },
      { heading: "CREATED" },
    ],
    keys.map((key) => [
      key.id,
      key.name,
      key.role ?? "",
      key.walletIds ? key.walletIds.join(",") : "all",
      key.expiresAt ? when(key.expiresAt) : "never",
      when(key.lastUsed),
      when(key.createdAt),
    ]),
  );
}
