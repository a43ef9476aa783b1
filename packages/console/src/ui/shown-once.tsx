import type { ReactNode } from "react";
import { CopyButton } from "./copy-button.tsx";

/**
 * A secret shown this once (an API key, a webhook signing secret): a panel with its heading, what to do with
 * it, the value beside a copy button, and "I have copied it", which `onDone` answers.
 * @example <ShownOnce title="Key created" secret={key} copyLabel="Copy key" onDone={hide}>Copy it now.</ShownOnce>
 */
export function ShownOnce(props: {
  title: ReactNode;
  secret: string;
  copyLabel: string;
  onDone: () => void;
  children: ReactNode;
}) {
  return (
    <div className="panel created-key" role="status">
      <h2>{props.title}</h2>
      <p>{props.children}</p>
      <p className="secret">
        <code>{props.secret}</code> <CopyButton value={props.secret} label={props.copyLabel} />
      </p>
      <button type="button" onClick={props.onDone}>
        I have copied it
      </button>
    </div>
  );
}
