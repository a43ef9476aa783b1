/**
 * The spending policy: four USD bounds (empty = none), the payee whitelist and the authorization switch.
 * Saving sends only what changed (the whitelist as the owner's additions and removals to its current
 * entries); the service's validation messages appear at their field.
 */
import type { Policy, PolicyInput, Wallet } from "@svc/sdk";
import { type FormEvent, useEffect, useState } from "react";
import { ErrorNotice, fieldError } from "../../ui/feedback.tsx";
import { useAction } from "../../ui/resource.ts";

const BOUNDS = [
  { field: "maxPerTx", label: "Per-transaction limit", hint: "The most one spend may be worth." },
  { field: "dailyLimit", label: "Daily limit", hint: "The most the rolling 24 h may hold." },
  { field: "alertAbove", label: "Alert above", hint: "A spend worth more raises a spend.alert event." },
  { field: "approvalAbove", label: "Approval above", hint: "A spend worth more waits for your approval." },
] as const;

function draftOf(policy: Policy) {
  return {
    maxPerTx: policy.maxPerTx ?? "",
    dailyLimit: policy.dailyLimit ?? "",
    alertAbove: policy.alertAbove ?? "",
    approvalAbove: policy.approvalAbove ?? "",
    whitelist: policy.whitelist,
    requireSpendAuthorization: policy.requireSpendAuthorization ?? false,
  };
}

export function PolicyEditor(props: { wallet: Wallet; policy: Policy; onSaved: (policy: Policy) => void }) {
  const { wallet, policy } = props;
  const [draft, setDraft] = useState(() => draftOf(policy));
  const [entry, setEntry] = useState("");
  const [saved, setSaved] = useState(false);
  useEffect(() => setDraft(draftOf(policy)), [policy]);

  const changes = (): PolicyInput => {
    const input: PolicyInput = {};
    for (const { field } of BOUNDS) {
      const value = draft[field].trim();
      if (value !== (policy[field] ?? "")) input[field] = value === "" ? null : value;
    }
    if (draft.whitelist.join("\n") !== policy.whitelist.join("\n")) input.whitelist = draft.whitelist;
    if (draft.requireSpendAuthorization !== (policy.requireSpendAuthorization ?? false)) {
      input.requireSpendAuthorization = draft.requireSpendAuthorization;
    }
    return input;
  };
  const changed = Object.keys(changes()).length > 0;
  const save = useAction(async () => {
    const input = changes();
    if (input.whitelist !== undefined) {
      // The owner's additions and removals, applied to the whitelist as it stands now: a list changed
      // elsewhere since this page loaded it (another tab, the CLI) keeps that change, and an entry removed
      // there does not come back from this page's older copy.
      const added = draft.whitelist.filter((entry) => !policy.whitelist.includes(entry));
      const removed = new Set(policy.whitelist.filter((entry) => !draft.whitelist.includes(entry)));
      const current = (await wallet.policy.get()).whitelist;
      input.whitelist = [
        ...current.filter((entry) => !removed.has(entry)),
        ...added.filter((entry) => !current.includes(entry)),
      ];
    }
    const updated = await wallet.policy.update(input);
    setSaved(true);
    props.onSaved(updated);
  });
  const onSubmit = (event: FormEvent) => {
    event.preventDefault();
    setSaved(false);
    void save.run();
  };
  const addEntry = () => {
    const value = entry.trim();
    if (value && !draft.whitelist.includes(value))
      setDraft({ ...draft, whitelist: [...draft.whitelist, value] });
    setEntry("");
  };

  return (
    <form className="panel policy" onSubmit={onSubmit} aria-labelledby="policy-title">
      <h2 id="policy-title">Spending policy</h2>
      <div className="bounds">
        {BOUNDS.map(({ field, label, hint }) => {
          const error = fieldError(save.error, field);
          return (
            <label key={field}>
              {label} <span className="optional">(USD)</span>
              <input
                name={field}
                inputMode="decimal"
                placeholder="no limit"
                value={draft[field]}
                onChange={(e) => {
                  setSaved(false);
                  setDraft({ ...draft, [field]: e.target.value } as typeof draft);
                }}
                aria-invalid={error ? true : undefined}
                aria-describedby={`${field}-hint`}
              />
              {error ? (
                <span className="field-error" id={`${field}-hint`}>
                  {error}
                </span>
              ) : (
                <span className="hint" id={`${field}-hint`}>
                  {hint}
                </span>
              )}
            </label>
          );
        })}
      </div>
      <fieldset className="whitelist">
        <legend>Whitelist</legend>
        <p className="hint">
          With entries, payments go only to these addresses or x402 hosts. Empty: any payee within the limits.
        </p>
        {draft.whitelist.length > 0 && (
          <ul>
            {draft.whitelist.map((item) => (
              <li key={item}>
                <code>{item}</code>{" "}
                <button
                  type="button"
                  className="link"
                  aria-label={`Remove ${item} from the whitelist`}
                  onClick={() => setDraft({ ...draft, whitelist: draft.whitelist.filter((w) => w !== item) })}
                >
                  Remove
                </button>
              </li>
            ))}
          </ul>
        )}
        <div className="inline-form">
          <label>
            Add an address or host
            <input
              name="whitelist-entry"
              value={entry}
              onChange={(e) => setEntry(e.target.value)}
              onKeyDown={(e) => {
                if (e.key === "Enter") {
                  e.preventDefault();
                  addEntry();
                }
              }}
            />
          </label>
          <button type="button" onClick={addEntry} disabled={entry.trim() === ""}>
            Add
          </button>
        </div>
        {fieldError(save.error, "whitelist") && (
          <span className="field-error">{fieldError(save.error, "whitelist")}</span>
        )}
      </fieldset>
      <label className="check">
        <input
          type="checkbox"
          checked={draft.requireSpendAuthorization}
          onChange={(e) => setDraft({ ...draft, requireSpendAuthorization: e.target.checked })}
        />
        Require a spend authorization from the daemon for every spend
      </label>
      <ErrorNotice error={save.error} />
      <div className="actions">
        <button type="submit" className="primary" disabled={!changed || save.pending}>
          {save.pending ? "Saving…" : "Save policy"}
        </button>
        {changed && (
          <button type="button" onClick={() => setDraft(draftOf(policy))}>
            Discard changes
          </button>
        )}
        {saved && !changed && (
          <span className="saved" role="status">
            Policy saved.
          </span>
        )}
      </div>
    </form>
  );
}
