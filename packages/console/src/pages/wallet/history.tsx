/**
 * A wallet's history: type and chain filters, pages of 20, and each transaction's status, hash and time, and
 * under a spend's amount the fee it paid once it landed (in the chain's native coin, as the service states it).
 * While a transaction on the page is waiting (for approval or for the chain) the page reads itself again
 * every few seconds, so it is seen to end confirmed, failed or rejected without a reload.
 */
import type { Transaction, TransactionQuery, Wallet } from "@svc/sdk";
import { useState } from "react";
import { formatAmount, formatRelative, formatTime, payeeLabel, shorten } from "../../format.ts";
import { CopyButton } from "../../ui/copy-button.tsx";
import { Empty, ErrorNotice, Loading } from "../../ui/feedback.tsx";
import { useResource } from "../../ui/resource.ts";

const PAGE_SIZE = 20;
const WAITING = new Set(["pending", "pending_approval"]);
const STATUS_LABEL: Record<Transaction["status"], string> = {
  pending_approval: "waiting for approval",
  pending: "pending",
  confirmed: "confirmed",
  failed: "failed",
  rejected: "rejected",
};

export function History(props: { wallet: Wallet; refreshKey: number }) {
  const { wallet } = props;
  const [type, setType] = useState<TransactionQuery["type"] | "">("");
  const [chain, setChain] = useState("");
  const [offset, setOffset] = useState(0);
  const [waiting, setWaiting] = useState(false);
  const page = useResource(
    async () => {
      const result = await wallet.transactions({
        limit: PAGE_SIZE,
        offset,
        ...(type ? { type } : {}),
        ...(chain ? { chain } : {}),
      });
      setWaiting(result.data.some((tx) => WAITING.has(tx.status)));
      return result;
    },
    [wallet.id, type, chain, offset, props.refreshKey],
    waiting ? { intervalMs: 3000 } : {},
  );
  const data = page.data;

  return (
    <section aria-labelledby="history-title">
      <div className="heading">
        <h2 id="history-title">History</h2>
        <div className="filters">
          <label>
            Type
            <select
              value={type}
              onChange={(e) => {
                setType(e.target.value as TransactionQuery["type"] | "");
                setOffset(0);
              }}
            >
              <option value="">All</option>
              <option value="send">Sends</option>
              <option value="receive">Receives</option>
              <option value="x402">x402 payments</option>
            </select>
          </label>
          <label>
            Chain
            <select
              value={chain}
              onChange={(e) => {
                setChain(e.target.value);
                setOffset(0);
              }}
            >
              <option value="">All</option>
              {wallet.chains.map((name) => (
                <option key={name} value={name}>
                  {name}
                </option>
              ))}
            </select>
          </label>
        </div>
      </div>
      <ErrorNotice error={page.error} />
      {!data && page.loading && <Loading label="Loading history…" />}
      {data && data.data.length === 0 && (
        <Empty>{type || chain ? "No transactions match these filters." : "No transactions yet."}</Empty>
      )}
      {data && data.data.length > 0 && (
        <>
          <div className="table-wrap">
            <table aria-label="Transactions">
              <thead>
                <tr>
                  <th scope="col">Type</th>
                  <th scope="col">Amount</th>
                  <th scope="col">Counterparty</th>
                  <th scope="col">Status</th>
                  <th scope="col">Transaction hash</th>
                  <th scope="col">Time</th>
                </tr>
              </thead>
              <tbody>
                {data.data.map((tx) => (
                  <TransactionRow key={tx.id} tx={tx} />
                ))}
              </tbody>
            </table>
          </div>
          <nav className="pager" aria-label="History pages">
            <button
              type="button"
              disabled={offset === 0}
              onClick={() => setOffset(Math.max(0, offset - PAGE_SIZE))}
            >
              Newer
            </button>
            <span>
              {offset + 1}–{offset + data.data.length} of {data.total}
            </span>
            <button
              type="button"
              disabled={offset + data.data.length >= data.total}
              onClick={() => setOffset(offset + PAGE_SIZE)}
            >
              Older
            </button>
          </nav>
        </>
      )}
    </section>
  );
}

function TransactionRow(props: { tx: Transaction }) {
  const { tx } = props;
  const incoming = tx.type === "receive";
  const counterparty = incoming ? tx.from : (tx.resource ?? tx.to);
  const shown = incoming ? payeeLabel(undefined, tx.from) : payeeLabel(tx.resource, tx.to);
  return (
    <tr data-transaction={tx.id}>
      <td>
        {tx.type === "x402" ? "x402" : tx.type}
        <span className="muted"> on {tx.chain}</span>
      </td>
      <td className="amount">
        {incoming ? "+" : "−"}
        {formatAmount(tx.amount, tx.token)}
        {tx.fee && <span className="hint">fee {formatAmount(tx.fee.amount, tx.fee.token)}</span>}
      </td>
      <td>
        <span className="muted">{incoming ? "from " : "to "}</span>
        <code title={counterparty}>{shown}</code>
      </td>
      <td>
        <span className={`status status-${tx.status}`}>{STATUS_LABEL[tx.status]}</span>
        {tx.failureReason && <span className="hint">{tx.failureReason}</span>}
      </td>
      <td>
        {tx.txHash ? (
          <>
            <code title={tx.txHash}>{shorten(tx.txHash, 8)}</code> <CopyButton value={tx.txHash} />
          </>
        ) : (
          <span className="muted">—</span>
        )}
      </td>
      <td>
        <time dateTime={tx.timestamp} title={formatRelative(tx.timestamp)}>
          {formatTime(tx.timestamp)}
        </time>
      </td>
    </tr>
  );
}
