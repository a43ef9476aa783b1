/** How the console writes an event in one line, and which wallet it is about. */
import type { SvcEvent } from "@svc/sdk";
import { formatAmount, formatUsd, payeeLabel, shorten } from "./format.ts";

/** One line that says what happened, amounts with their token (and a landed spend's fee). */
export function describeEvent(event: SvcEvent): string {
  switch (event.type) {
    case "transaction.created":
    case "transaction.confirmed":
    case "transaction.failed":
    case "approval.requested":
    case "approval.approved":
    case "approval.rejected":
    case "approval.expired": {
      const tx = event.data;
      const sent = `${tx.type === "x402" ? "x402 payment" : "send"} of ${formatAmount(tx.amount, tx.token)} to ${payeeLabel(tx.resource, tx.to)} on ${tx.chain}`;
      const what = tx.fee ? `${sent} (fee ${formatAmount(tx.fee.amount, tx.fee.token)})` : sent;
      return tx.failureReason ? `${what}: ${tx.failureReason}` : what;
    }
    case "transaction.received": {
      const tx = event.data;
      return `received ${formatAmount(tx.amount, tx.token)} from ${shorten(tx.from, 10)} on ${tx.chain}`;
    }
    case "spend.alert":
      return `a spend worth ${formatUsd(event.data.usdValue)} (alert above ${formatUsd(event.data.alertAbove)}): ${formatAmount(event.data.transaction.amount, event.data.transaction.token)}`;
    case "policy.updated": {
      const p = event.data;
      const bounds = [
        p.maxPerTx && `per transaction ${formatUsd(p.maxPerTx)}`,
        p.dailyLimit && `daily ${formatUsd(p.dailyLimit)}`,
        p.approvalAbove && `approval above ${formatUsd(p.approvalAbove)}`,
      ].filter(Boolean);
      return `policy ${p.status}${bounds.length ? `: ${bounds.join(", ")}` : ", no limits"}`;
    }
    case "wallet.archived":
      return `wallet “${event.data.name}” archived`;
    case "wallet.restored":
      return `wallet “${event.data.name}” restored`;
    case "api_key.created":
      return `key “${event.data.name}” created (${event.data.role ?? "agent"})`;
    case "api_key.revoked":
      return `key “${event.data.name}” revoked`;
  }
}

/** The wallet an event is about, if any. */
export function eventWalletId(event: SvcEvent): string | undefined {
  const data = event.data as { walletId?: string; id?: string; transaction?: { walletId: string } };
  if (event.type === "wallet.archived" || event.type === "wallet.restored") return data.id;
  return data.walletId ?? data.transaction?.walletId;
}
