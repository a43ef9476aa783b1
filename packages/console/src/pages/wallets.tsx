/** The account's wallets: name, addresses, balances with their USD total, status; and creating one. */
import type { Balance, Policy, Wallet } from "@svc/sdk";
import { type FormEvent, useState } from "react";
import { formatAmount, formatUsd } from "../format.ts";
import { Link, navigate } from "../router.tsx";
import { svc } from "../session.ts";
import { CopyButton } from "../ui/copy-button.tsx";
import { Empty, ErrorNotice, Loading } from "../ui/feedback.tsx";
import { useAction, useResource } from "../ui/resource.ts";

interface WalletRow {
  wallet: Wallet;
  /** The balance, or the error that kept it from being read. */
  balance: Balance | { error: unknown };
  /** The spending policy (for its status: a paused wallet spends nothing); undefined when unread. */
  policy: Policy | undefined;
}

async function loadWallets(): Promise<WalletRow[]> {
  const wallets = await svc().wallet.list();
  return Promise.all(
    wallets.map(async (wallet) => {
      const [balance, policy] = await Promise.all([
        wallet.balance().catch((error: unknown) => ({ error })),
        wallet.policy.get().catch(() => undefined),
      ]);
      return { wallet, balance, policy };
    }),
  );
}

export function WalletsPage() {
  const rows = useResource(loadWallets, []);
  return (
    <section>
      <div className="heading">
        <h1>Wallets</h1>
        <CreateWallet onCreated={(id) => navigate(`/wallets/${id}`)} />
      </div>
      <ErrorNotice error={rows.error} />
      {rows.loading && !rows.data && <Loading label="Loading wallets…" />}
      {rows.data?.length === 0 && (
        <Empty>No wallets yet. Create one to give an agent something to spend.</Empty>
      )}
      {rows.data && rows.data.length > 0 && (
        <ul className="cards" aria-label="Wallets">
          {rows.data.map((row) => (
            <WalletCard key={row.wallet.id} row={row} />
          ))}
        </ul>
      )}
    </section>
  );
}

function WalletCard(props: { row: WalletRow }) {
  const { wallet, balance, policy } = props.row;
  // An active wallet whose spending is paused says so: "active" would tell the owner it can spend.
  const status = wallet.status === "active" && policy?.status === "paused" ? "paused" : wallet.status;
  return (
    <li className="card">
      <div className="card-title">
        <Link to={`/wallets/${wallet.id}`}>{wallet.name}</Link>
        <span className={`status status-${status}`}>{status}</span>
      </div>
      <dl className="addresses">
        {wallet.evm && (
          <div>
            <dt>EVM</dt>
            <dd>
              <code>{wallet.evm.address}</code> <CopyButton value={wallet.evm.address} label="Copy" />
            </dd>
          </div>
        )}
        {wallet.solana && (
          <div>
            <dt>Solana</dt>
            <dd>
              <code>{wallet.solana.address}</code> <CopyButton value={wallet.solana.address} label="Copy" />
            </dd>
          </div>
        )}
      </dl>
      {"error" in balance ? (
        <ErrorNotice error={balance.error} />
      ) : (
        <>
          <p className="total">
            <span className="label">Total</span> <strong>{formatUsd(balance.totalUsdValue)}</strong>
          </p>
          <ul className="balances" aria-label={`Balances of ${wallet.name}`}>
            {balance.balances
              .filter((b) => b.amount !== "0")
              .map((b) => (
                <li key={`${b.chain}:${b.token}`}>
                  {formatAmount(b.amount, b.token)} <span className="muted">on {b.chain}</span>
                </li>
              ))}
          </ul>
        </>
      )}
    </li>
  );
}

function CreateWallet(props: { onCreated: (walletId: string) => void }) {
  const [open, setOpen] = useState(false);
  const [name, setName] = useState("");
  const chains = useResource(() => svc().chains.list(), []);
  const [unchecked, setUnchecked] = useState<ReadonlySet<string>>(new Set());
  const chosen = (chains.data ?? []).map((chain) => chain.name).filter((chain) => !unchecked.has(chain));
  const toggle = (chain: string) =>
    setUnchecked((previous) => {
      const next = new Set(previous);
      if (next.has(chain)) next.delete(chain);
      else next.add(chain);
      return next;
    });
  const create = useAction(async () => {
    const wallet = await svc().wallet.create({ name, chains: chosen });
    props.onCreated(wallet.id);
  });
  if (!open) {
    return (
      <button type="button" className="primary" onClick={() => setOpen(true)}>
        Create wallet
      </button>
    );
  }
  const onSubmit = (event: FormEvent) => {
    event.preventDefault();
    void create.run();
  };
  return (
    <form className="inline-form" onSubmit={onSubmit} aria-label="Create wallet">
      <label>
        Name
        <input value={name} onChange={(e) => setName(e.target.value)} required maxLength={100} />
      </label>
      <fieldset className="chains">
        <legend>Chains</legend>
        {chains.loading && !chains.data && <Loading label="Loading chains…" />}
        {chains.data?.map((chain) => (
          <label key={chain.name} className="check">
            <input type="checkbox" checked={!unchecked.has(chain.name)} onChange={() => toggle(chain.name)} />
            {chain.name}
          </label>
        ))}
      </fieldset>
      <ErrorNotice error={chains.error} />
      <button type="submit" className="primary" disabled={create.pending || chosen.length === 0}>
        {create.pending ? "Creating…" : "Create"}
      </button>
      <button type="button" onClick={() => setOpen(false)}>
        Cancel
      </button>
      <ErrorNotice error={create.error} />
    </form>
  );
}
