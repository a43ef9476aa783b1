/**
 * The approval routes (`GET /v1/approvals`, `POST /v1/approvals/:id/approve|reject`), called directly
 * because the SDK on main does not have `svc.approvals` yet (branch wt-sdk12 adds it with the same
 * shapes; once merged, the commands should call `svc.approvals` and this file goes).
 */
import { randomUUID } from "node:crypto";
import { errorFromResponse, SvcConnectionError, type Transaction } from "@svc/sdk";

/** A held spend: the transaction with its approval deadline. */
export type Approval = Transaction & { expiresAt: string };

/** The approval routes for one credential. */
export interface ApprovalsApi {
  list(query: { status?: string; limit?: number }): Promise<Approval[]>;
  approve(transactionId: string): Promise<Transaction>;
  reject(transactionId: string): Promise<Transaction>;
}

/**
 * The approval routes with `apiKey` at `baseUrl` (ending in `/v1`); errors are the SDK's `SvcError`s.
 * @example
 * const held = await approvalsApi(baseUrl, apiKey).list({ status: "pending" });
 */
export function approvalsApi(baseUrl: string, apiKey: string): ApprovalsApi {
  const request = async <T>(method: string, path: string, idempotencyKey?: string): Promise<T> => {
    let response: Response;
    try {
      response = await fetch(`${baseUrl}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${apiKey}`,
          ...(idempotencyKey === undefined ? {} : { "idempotency-key": idempotencyKey }),
        },
        signal: AbortSignal.timeout(60_000),
      });
    } catch (cause) {
      throw new SvcConnectionError({
        code: "ConnectionError",
        status: 0,
        message: `No answer from ${method} ${path}: ${cause instanceof Error ? cause.message : String(cause)}`,
        reason: "network_error",
        cause,
      });
    }
    const text = await response.text();
    let body: unknown;
    try {
      body = text === "" ? undefined : JSON.parse(text);
    } catch {
      body = undefined;
    }
    if (!response.ok) throw errorFromResponse(response.status, body, response.headers);
    return body as T;
  };
  const decide = (decision: "approve" | "reject") => (transactionId: string) =>
    // One key per decision: a repeated request is answered with the first decision, never a second one.
    request<Transaction>("POST", `/approvals/${encodeURIComponent(transactionId)}/${decision}`, randomUUID());
  return {
    list: async ({ status, limit }) => {
      const query = new URLSearchParams();
      if (status !== undefined) query.set("status", status);
      if (limit !== undefined) query.set("limit", String(limit));
      const suffix = query.size === 0 ? "" : `?${query}`;
      return (await request<{ data: Approval[] }>("GET", `/approvals${suffix}`)).data;
    },
    approve: decide("approve"),
    reject: decide("reject"),
  };
}
