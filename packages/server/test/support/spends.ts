import type { ApiClient } from "./api-client.ts";
import { eventually } from "./eventually.ts";

/** Polls a transaction until it leaves `pending`; returns its final view. */
export async function waitForSettled(api: ApiClient, token: string, transactionId: string) {
  return eventually(
    async () => {
      const response = await api.get(`/v1/transactions/${transactionId}`, token);
      if (response.status !== 200) throw new Error(`GET transaction: ${response.text}`);
      return response.body.status === "pending" ? undefined : response.body;
    },
    { describe: `transaction ${transactionId} to leave pending` },
  );
}

/** Polls a wallet's history until `predicate` holds for its rows (receives arrive through the watcher). */
export async function waitForHistory(
  api: ApiClient,
  token: string,
  walletId: string,
  predicate: (rows: any[]) => boolean,
): Promise<any[]> {
  let last = "";
  return eventually(
    async () => {
      const response = await api.get(`/v1/wallets/${walletId}/transactions?limit=100`, token);
      last = response.text;
      return predicate(response.body.data) ? (response.body.data as any[]) : undefined;
    },
    { describe: () => `the history of ${walletId} to match; last seen: ${last.slice(0, 500)}` },
  );
}
