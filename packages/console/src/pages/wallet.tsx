/**
 * One wallet: addresses, balances, the faucet on test networks, today's spending against the daily limit,
 * the history, the policy editor, pause / resume, and archiving.
 */
import type { Chain, Policy, Wallet } from "@svc/sdk";
import { type FormEvent, useRef, useState } from "react";
import { formatAmount, formatTime, formatUsd } from "../format.ts";
import { Link } from "../router.tsx";
import { svc } from "../session.ts";
import { CopyButton } from "../ui/copy-button.tsx";
import { Empty, ErrorNotice, Loading } from "../ui/feedback.tsx";
import { useAction, useResource } from "../ui/resource.ts";
import { History } from "./wallet/history.tsx";
import { PolicyEditor } from "./wallet/policy-editor.tsx";
import { SpendingChart } from "./wallet/spending-chart.tsx";

export function WalletPage(props: { walletId: string }) {
  const wallet = useResource(() => svc().wallet.get(props.walletId), [props.walletId]);
  const [refreshKey, setRefreshKey] = useState(0);
  const refresh = () => setRefreshKey((k) => k + 1);

  if (!wallet.data) {
    return (
      <section>
        <p>
          <Link to="/wallets">← Wallets</Link>
        </p>
        {wallet.loading ? <Loading label="Loading wallet…" /> : <ErrorNotice error={wallet.error} />}
      </section>
    );
  }
  return (
    <WalletView wallet={wallet.data} refreshKey={refreshKey} onChange={refresh} reload={wallet.reload} />
  );
}

function WalletView(props: { wallet: Wallet; refreshKey: number; onChange: () => void; reload: () => void }) {
  const { wallet, refreshKey } = props;
  const policy = useResource(() => wallet.policy.get(), [wallet.id, refreshKey]);
  const spending = useResource(() => wallet.spending(), [wallet.id, refreshKey], { intervalMs: 15_000 });
  const active = wallet.status === "active";
  const paused = policy.data?.status === "paused";

  return (
    <section>
      <p>
        <Link to="/wallets">← Wallets</Link>
      </p>
      <div className="heading">
        <h1>
          {wallet.name} <span className={`status status-${wallet.status}`}>{wallet.status}</span>{" "}
          {active && paused && <span className="status status-paused">paused</span>}
        </h1>
        {active && policy.data && <PauseResume wallet={wallet} policy={policy.data} onDone={policy.reload} />}
      </div>
      <dl className="addresses">
        {wallet.evm && (
          <div>
            <dt>EVM address</dt>
            <dd>
              <code>{wallet.evm.address}</code> <CopyButton value={wallet.evm.address} />
            </dd>
          </div>
        )}
        {wallet.solana && (
          <div>
            <dt>Solana address</dt>
            <dd>
              <code>{wallet.solana.address}</code> <CopyButton value={wallet.solana.address} />
            </dd>
          </div>
        )}
        <div>
          <dt>Created</dt>
          <dd>{formatTime(wallet.createdAt)}</dd>
        </div>
      </dl>

      <div className="columns">
        <Balances wallet={wallet} refreshKey={refreshKey} />
        {active && <Faucet wallet={wallet} onFunded={props.onChange} />}
      </div>

      <section aria-labelledby="spending-heading">
        <h2 id="spending-heading">Spending, last 24 hours</h2>
        <ErrorNotice error={spending.error} />
        {!spending.data && spending.loading && <Loading label="Loading spending…" />}
        {spending.data && <SpendingChart spending={spending.data} />}
      </section>

      <History wallet={wallet} refreshKey={refreshKey} />

      <ErrorNotice error={policy.error} />
      {!policy.data && policy.loading && <Loading label="Loading policy…" />}
      {policy.data && active && (
        <PolicyEditor wallet={wallet} policy={policy.data} onSaved={(_: Policy) => props.onChange()} />
      )}
      {active ? (
        <Archive wallet={wallet} onArchived={props.reload} />
      ) : (
        <Restore wallet={wallet} onRestored={props.reload} />
      )}
    </section>
  );
}

function Balances(props: { wallet: Wallet; refreshKey: number }) {
  const balance = useResource(() => props.wallet.balance(), [props.wallet.id, props.refreshKey]);
  return (
    <section className="panel" aria-labelledby="balances-title">
      <div className="heading">
        <h2 id="balances-title">Balances</h2>
        <button type="button" onClick={balance.reload} disabled={balance.loading}>
          {balance.loading ? "Reading…" : "Refresh"}
        </button>
      </div>
      <ErrorNotice error={balance.error} />
      {!balance.data && balance.loading && <Loading label="Reading the chains…" />}
      {balance.data && (
        <>
          <p className="total">
            <span className="label">Total</span> <strong>{formatUsd(balance.data.totalUsdValue)}</strong>
          </p>
          {balance.data.balances.length === 0 ? (
            <Empty>No balances.</Empty>
          ) : (
            <div className="table-wrap">
              <table aria-label="Balances">
                <thead>
                  <tr>
                    <th scope="col">Chain</th>
                    <th scope="col">Amount</th>
                    <th scope="col">USD</th>
                  </tr>
                </thead>
                <tbody>
                  {balance.data.balances.map((b) => (
                    <tr key={`${b.chain}:${b.token}`}>
                      <td>{b.chain}</td>
                      <td className="amount">{formatAmount(b.amount, b.token)}</td>
                      <td className="amount">{formatUsd(b.usdValue)}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )}
          <p className="hint">Read {formatTime(balance.data.updatedAt)}.</p>
        </>
      )}
    </section>
  );
}

/** Test coins, on the wallet's chains that are local or test networks. */
function Faucet(props: { wallet: Wallet; onFunded: () => void }) {
  const chains = useResource(() => svc().chains.list(), []);
  const testChains = (chains.data ?? []).filter(
    (c: Chain) => c.testnet && props.wallet.chains.includes(c.name),
  );
  const [chain, setChain] = useState("");
  const [token, setToken] = useState("USDC");
  const [amount, setAmount] = useState("");
  const [done, setDone] = useState<string | undefined>(undefined);
  const chosen = testChains.find((c) => c.name === chain) ?? testChains[0];
  const tokens = chosen ? [chosen.nativeToken.symbol, ...chosen.tokens.map((t) => t.symbol)] : [];
  const fund = useAction(async () => {
    if (!chosen) return;
    setDone(undefined);
    const receive = await props.wallet.faucet({ chain: chosen.name, token, ...(amount ? { amount } : {}) });
    setDone(`Received ${formatAmount(receive.amount, receive.token)} on ${receive.chain}.`);
    props.onFunded();
  });
  if (chains.data && testChains.length === 0) return null;
  const onSubmit = (event: FormEvent) => {
    event.preventDefault();
    void fund.run();
  };
  return (
    <form className="panel faucet" onSubmit={onSubmit} aria-labelledby="faucet-title">
      <h2 id="faucet-title">Faucet</h2>
      <p className="hint">Test coins on local and test networks.</p>
      <ErrorNotice error={chains.error} />
      {chosen && (
        <>
          <label>
            Chain
            <select value={chosen.name} onChange={(e) => setChain(e.target.value)}>
              {testChains.map((c) => (
                <option key={c.name} value={c.name}>
                  {c.name}
                </option>
              ))}
            </select>
          </label>
          <label>
            Token
            <select
              value={tokens.includes(token) ? token : tokens[0]}
              onChange={(e) => setToken(e.target.value)}
            >
              {tokens.map((symbol) => (
                <option key={symbol} value={symbol}>
                  {symbol}
                </option>
              ))}
            </select>
          </label>
          <label>
            Amount <span className="optional">(default 100 USDC or 1 coin)</span>
            <input
              name="faucet-amount"
              inputMode="decimal"
              value={amount}
              onChange={(e) => setAmount(e.target.value)}
            />
          </label>
          <button type="submit" className="primary" disabled={fund.pending}>
            {fund.pending ? "Waiting for the chain…" : "Request test coins"}
          </button>
        </>
      )}
      <ErrorNotice error={fund.error} />
      {done && (
        <p className="saved" role="status">
          {done}
        </p>
      )}
    </form>
  );
}

function PauseResume(props: { wallet: Wallet; policy: Policy; onDone: () => void }) {
  const paused = props.policy.status === "paused";
  const act = useAction(async () => {
    await (paused ? props.wallet.policy.resume() : props.wallet.policy.pause());
    props.onDone();
  });
  return (
    <div>
      <button type="button" onClick={() => void act.run()} disabled={act.pending}>
        {paused ? "Resume spending" : "Pause spending"}
      </button>
      <ErrorNotice error={act.error} />
    </div>
  );
}

/** Restoring an archived wallet (an agent may archive its wallet; only the owner brings it back). */
function Restore(props: { wallet: Wallet; onRestored: () => void }) {
  const restore = useAction(async () => {
    await props.wallet.restore();
    props.onRestored();
  });
  return (
    <section aria-labelledby="restore-title">
      <h2 id="restore-title">Restore</h2>
      <p className="hint">Restored, the wallet spends again, under the policy it had.</p>
      <button type="button" onClick={() => void restore.run()} disabled={restore.pending}>
        {restore.pending ? "Restoring…" : "Restore wallet"}
      </button>
      <ErrorNotice error={restore.error} />
    </section>
  );
}

/** Archiving, after a confirmation in a modal dialog that names the wallet. */
function Archive(props: { wallet: Wallet; onArchived: () => void }) {
  const dialog = useRef<HTMLDialogElement>(null);
  const archive = useAction(async () => {
    await props.wallet.archive();
    dialog.current?.close();
    props.onArchived();
  });
  return (
    <section className="danger-zone" aria-labelledby="archive-title">
      <h2 id="archive-title">Archive</h2>
      <p className="hint">
        An archived wallet keeps its history and addresses, but nothing can be sent or paid from it until you
        restore it.
      </p>
      <button type="button" className="danger" onClick={() => dialog.current?.showModal()}>
        Archive wallet…
      </button>
      <dialog ref={dialog} aria-labelledby="archive-dialog-title">
        <h2 id="archive-dialog-title">Archive “{props.wallet.name}”?</h2>
        <p>Its agents can no longer spend from it, until you restore it.</p>
        <ErrorNotice error={archive.error} />
        <div className="actions">
          <button
            type="button"
            className="danger"
            onClick={() => void archive.run()}
            disabled={archive.pending}
          >
            {archive.pending ? "Archiving…" : `Archive ${props.wallet.name}`}
          </button>
          <button type="button" onClick={() => dialog.current?.close()}>
            Cancel
          </button>
        </div>
      </dialog>
    </section>
  );
}
