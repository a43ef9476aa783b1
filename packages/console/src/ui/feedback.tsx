/** The states every view shows the same way: loading, empty, and an error with the service's words. */
import { SvcError } from "@svc/sdk";
import type { ReactNode } from "react";

export function Loading(props: { label?: string }) {
  return (
    <p className="loading" role="status">
      <span className="spinner" aria-hidden="true" /> {props.label ?? "Loading…"}
    </p>
  );
}

export function Empty(props: { children: ReactNode }) {
  return <p className="empty">{props.children}</p>;
}

/** The message of a failure as the service said it; a failure of the browser or network in plain words. */
export function errorMessage(error: unknown): string {
  if (error instanceof SvcError) return error.message;
  if (error instanceof Error) return error.message;
  return String(error);
}

/** An error box: the service's message, and its request id to quote to support. */
export function ErrorNotice(props: { error: unknown; onDismiss?: () => void }) {
  if (props.error === undefined || props.error === null) return null;
  const requestId = props.error instanceof SvcError ? props.error.requestId : undefined;
  return (
    <div className="error" role="alert">
      <p>{errorMessage(props.error)}</p>
      {requestId && (
        <p className="request-id">
          Request id <code>{requestId}</code>
        </p>
      )}
      {props.onDismiss && (
        <button type="button" className="link" onClick={props.onDismiss}>
          Dismiss
        </button>
      )}
    </div>
  );
}

/**
 * The service's validation messages for one field: a 400's `details.issues` name the field by its path
 * (`dailyLimit`, `allowlist.0`); other refusals that name a field put it in `details.field`.
 */
export function fieldError(error: unknown, field: string): string | undefined {
  if (!(error instanceof SvcError) || error.code !== "ValidationError") return undefined;
  const details = error.details as
    | { issues?: { path: string; message: string }[]; field?: string }
    | undefined;
  const issue = details?.issues?.find((i) => i.path === field || i.path.startsWith(`${field}.`));
  if (issue) return issue.message;
  if (details?.field === field) return error.message;
  return undefined;
}
