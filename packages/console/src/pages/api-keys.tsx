/**
 * API keys: the account's keys (never their values), creating one bound to chosen wallets with a role and
 * an expiry (its value shown once, here, with a copy button), and revoking.
 */
import type { ApiKey, ApiKeyRole, CreatedApiKey, Wallet } from "@svc/sdk";
import { type FormEvent, useState } from "react";
import { formatRelative, formatTime } from "../format.ts";
import { svc } from "../session.ts";
import { Empty, ErrorNotice, fieldError, Loading } from "../ui/feedback.tsx";
import { useAction, useResource } from "../ui/resource.ts";
import { ShownOnce } from "../ui/shown-once.tsx";

const ROLES: { role: ApiKeyRole; label: string }[] = [
  { role: "agent", label: "Agent: reads and spends within the policy; can only tighten it" },
  { role: "read", label: "Read: sees, never acts" },
  { role: "admin", label: "Admin: everything you can do" },
];

export function ApiKeysPage() {
  const data = useResource(async () => {
    const [keys, wallets] = await Promise.all([svc().apiKeys.list(), svc().wallet.list()]);
    return { keys, wallets };
  }, []);
  const [created, setCreated] = useState<CreatedApiKey | undefined>(undefined);
  const names = new Map((data.data?.wallets ?? []).map((w) => [w.id, w.name]));

  return (
    <section>
      <h1>API keys</h1>
      {created && <CreatedKey apiKey={created} onDone={() => setCreated(undefined)} />}
      {data.data && (
        <CreateKey
          wallets={data.data.wallets.filter((w) => w.status === "active")}
          onCreated={(key) => {
            setCreated(key);
            data.reload();
          }}
        />
      )}
      <h2>Active keys</h2>
      <ErrorNotice error={data.error} />
      {!data.data && data.loading && <Loading label="Loading keys…" />}
      {data.data?.keys.length === 0 && <Empty>No API keys yet. Create one for each agent.</Empty>}
      {data.data && data.data.keys.length > 0 && (
        <div className="table-wrap">
          <table aria-label="API keys">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Role</th>
                <th scope="col">Wallets</th>
                <th scope="col">Created</th>
                <th scope="col">Last used</th>
                <th scope="col">Expires</th>
                <th scope="col">
                  <span className="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {data.data.keys.map((key) => (
                <KeyRow key={key.id} apiKey={key} walletNames={names} onRevoked={data.reload} />
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

function KeyRow(props: { apiKey: ApiKey; walletNames: Map<string, string>; onRevoked: () => void }) {
  const { apiKey } = props;
  const [confirming, setConfirming] = useState(false);
  const revoke = useAction(async () => {
    await svc().apiKeys.revoke(apiKey.id);
    props.onRevoked();
  });
  const wallets =
    apiKey.walletIds === null || apiKey.walletIds === undefined
      ? "all wallets"
      : apiKey.walletIds.map((id) => props.walletNames.get(id) ?? id).join(", ");
  return (
    <tr>
      <td>
        {apiKey.name}
        <span className="hint">
          <code>{apiKey.id}</code>
        </span>
      </td>
      <td>{apiKey.role ?? "agent"}</td>
      <td>{wallets}</td>
      <td>{formatTime(apiKey.createdAt)}</td>
      <td>{apiKey.lastUsed ? formatRelative(apiKey.lastUsed) : "never"}</td>
      <td>{apiKey.expiresAt ? formatTime(apiKey.expiresAt) : "never"}</td>
      <td>
        {confirming ? (
          <span className="actions">
            <button
              type="button"
              className="danger"
              disabled={revoke.pending}
              onClick={() => void revoke.run()}
              aria-label={`Revoke ${apiKey.name} now`}
            >
              Revoke now
            </button>
            <button type="button" onClick={() => setConfirming(false)}>
              Keep
            </button>
          </span>
        ) : (
          <button type="button" onClick={() => setConfirming(true)} aria-label={`Revoke ${apiKey.name}…`}>
            Revoke…
          </button>
        )}
        <ErrorNotice error={revoke.error} />
      </td>
    </tr>
  );
}

function CreateKey(props: { wallets: Wallet[]; onCreated: (key: CreatedApiKey) => void }) {
  const [name, setName] = useState("");
  const [role, setRole] = useState<ApiKeyRole>("agent");
  const [bound, setBound] = useState<ReadonlySet<string>>(new Set());
  const [expires, setExpires] = useState("");
  const create = useAction(async () => {
    const key = await svc().apiKeys.create({
      name,
      role,
      ...(role !== "admin" && bound.size > 0 ? { walletIds: [...bound] } : {}),
      // The local time the owner picked, as an instant.
      ...(expires ? { expiresAt: new Date(expires).toISOString() } : {}),
    });
    setName("");
    setBound(new Set());
    setExpires("");
    props.onCreated(key);
  });
  const toggle = (id: string) =>
    setBound((previous) => {
      const next = new Set(previous);
      if (next.has(id)) next.delete(id);
      else next.add(id);
      return next;
    });
  const onSubmit = (event: FormEvent) => {
    event.preventDefault();
    void create.run();
  };
  return (
    <form className="panel" onSubmit={onSubmit} aria-labelledby="create-key-title">
      <h2 id="create-key-title">Create a key</h2>
      <label>
        Key name
        <input value={name} onChange={(e) => setName(e.target.value)} required maxLength={100} />
        {fieldError(create.error, "name") && (
          <span className="field-error">{fieldError(create.error, "name")}</span>
        )}
      </label>
      <fieldset>
        <legend>Role</legend>
        {ROLES.map((option) => (
          <label key={option.role} className="check block">
            <input
              type="radio"
              name="role"
              value={option.role}
              checked={role === option.role}
              onChange={() => setRole(option.role)}
            />
            {option.label}
          </label>
        ))}
      </fieldset>
      {role !== "admin" && (
        <fieldset>
          <legend>Wallets it may use</legend>
          {props.wallets.length === 0 && (
            <p className="hint">No wallets yet: the key will see every wallet.</p>
          )}
          {props.wallets.map((wallet) => (
            <label key={wallet.id} className="check">
              <input type="checkbox" checked={bound.has(wallet.id)} onChange={() => toggle(wallet.id)} />
              {wallet.name}
            </label>
          ))}
          {props.wallets.length > 0 && (
            <p className="hint">
              {bound.size === 0
                ? "None chosen: the key sees every wallet, now and later."
                : `${bound.size} chosen.`}
            </p>
          )}
        </fieldset>
      )}
      <label>
        Expires <span className="optional">(optional, your local time)</span>
        <input type="datetime-local" value={expires} onChange={(e) => setExpires(e.target.value)} />
        {fieldError(create.error, "expiresAt") && (
          <span className="field-error">{fieldError(create.error, "expiresAt")}</span>
        )}
      </label>
      <ErrorNotice error={create.error} />
      <button type="submit" className="primary" disabled={create.pending}>
        {create.pending ? "Creating…" : "Create key"}
      </button>
    </form>
  );
}

/** The new key's value, shown this once. */
function CreatedKey(props: { apiKey: CreatedApiKey; onDone: () => void }) {
  return (
    <ShownOnce
      title={<>Key “{props.apiKey.name}” created</>}
      secret={props.apiKey.key}
      copyLabel="Copy key"
      onDone={props.onDone}
    >
      Copy it now: <strong>you will not see it again.</strong> Give it to the agent as{" "}
      <code>SVC_API_KEY</code>.
    </ShownOnce>
  );
}
