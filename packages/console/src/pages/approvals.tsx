/**
 * The approval queue: spends above a wallet's `approvalAbove`, waiting for the owner. Read again every
 * 3 s, so a new request appears (and a decided one leaves) without a reload.
 */
import type { Approval, Wallet } from "@svc/sdk";
import { formatAmount, formatRelative, formatTime, groupedAddress, payeeLabel } from "../format.ts";
import { APPROVALS_POLL_MS } from "../polls.ts";
import { Link } from "../router.tsx";
import { svc } from "../session.ts";
import { CopyButton } from "../ui/copy-button.tsx";
import { Empty, ErrorNotice, Loading } from "../ui/feedback.tsx";
import { changed, useAction, useResource } from "../ui/resource.ts";

export function ApprovalsPage() {
  const queue = useResource(
    async () => {
      const [approvals, wallets] = await Promise.all([svc().approvals.list(), svc().wallet.list()]);
      return { approvals, wallets: new Map(wallets.map((w) => [w.id, w])) };
    },
    [],
    { intervalMs: APPROVALS_POLL_MS, follows: "approvals" },
  );
  return (
    <section>
      <h1>Approvals</h1>
      <p className="hint">
        Spends above a wallet's approval threshold wait here for you. Unanswered, they expire and nothing is
        sent.
      </p>
      <ErrorNotice error={queue.error} />
      {!queue.data && queue.loading && <Loading label="Loading approvals…" />}
      {queue.data?.approvals.length === 0 && <Empty>Nothing waiting for you.</Empty>}
      {queue.data && queue.data.approvals.length > 0 && (
        <ul className="cards" aria-label="Waiting for approval">
          {queue.data.approvals.map((approval) => (
            <ApprovalCard
              key={approval.id}
              approval={approval}
              wallet={queue.data?.wallets.get(approval.walletId)}
            />
          ))}
        </ul>
      )}
    </section>
  );
}

function ApprovalCard(props: { approval: Approval; wallet: Wallet | undefined }) {
  const { approval, wallet } = props;
  const decide = useAction(async (decision: "approve" | "reject") => {
    await (decision === "approve"
      ? svc().approvals.approve(approval.id)
      : svc().approvals.reject(approval.id));
    // The queue here and the count in the navigation read it again now, not at their next poll.
    changed("approvals");
  });
  const label = `${formatAmount(approval.amount, approval.token)} to ${payeeLabel(approval.resource, approval.to)}`;
  return (
    <li className="card approval" aria-label={label}>
      <div className="card-title">
        <strong className="amount">{formatAmount(approval.amount, approval.token)}</strong>
        <span className="muted">
          {approval.type === "x402" ? "x402 payment" : "send"} on {approval.chain}
        </span>
      </div>
      <dl className="addresses">
        <div>
          <dt>Payee</dt>
          <dd>
            <code className="address-full" title={approval.to}>
              {groupedAddress(approval.to)}
            </code>{" "}
            <CopyButton value={approval.to} />
          </dd>
        </div>
        {approval.resource && (
          <div>
            <dt>Resource</dt>
            <dd>
              <code>{approval.resource}</code>
            </dd>
          </div>
        )}
        <div>
          <dt>Wallet</dt>
          <dd>
            <Link to={`/wallets/${approval.walletId}`}>{wallet?.name ?? approval.walletId}</Link>
          </dd>
        </div>
        <div>
          <dt>Asked</dt>
          <dd>
            <time dateTime={approval.timestamp} title={formatTime(approval.timestamp)}>
              {formatRelative(approval.timestamp)}
            </time>
          </dd>
        </div>
        <div>
          <dt>Expires</dt>
          <dd>
            <time dateTime={approval.expiresAt}>
              {formatTime(approval.expiresAt)} ({formatRelative(approval.expiresAt)})
            </time>
          </dd>
        </div>
      </dl>
      <ErrorNotice error={decide.error} />
      <div className="actions">
        <button
          type="button"
          className="primary"
          disabled={decide.pending}
          onClick={() => void decide.run("approve")}
        >
          Approve
        </button>
        <button
          type="button"
          className="danger"
          disabled={decide.pending}
          onClick={() => void decide.run("reject")}
        >
          Reject
        </button>
        {decide.pending && <span className="muted">Sending your decision…</span>}
      </div>
    </li>
  );
}
