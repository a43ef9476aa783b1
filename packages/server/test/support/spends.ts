import type { ApiClient } from "./test-server.ts";

/** Polls a transaction until it leaves `pending`; returns its final view. */
export async function waitForSettled(
  api: ApiClient,
  token: string,
  transactionId: string,
  timeoutMs = 30_000,
) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const response = await api.get(`/v1/transactions/${transactionId}`, token);
    if (response.status !== 200) throw new Error(`GET transaction: ${response.text}`);
    if (response.body.status !== "pending") return response.body;
    if (Date.now() > deadline)
      throw new Error(`transaction ${transactionId} still pending after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Polls a wallet's history until `predicate` holds for its rows (receives arrive through the watcher). */
export async function waitForHistory(
  api: ApiClient,
  token: string,
  walletId: string,
  predicate: (rows: any[]) => boolean,
  timeoutMs = 30_000,
): Promise<any[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const response = await api.get(`/v1/wallets/${walletId}/transactions?limit=100`, token);
    if (predicate(response.body.data)) return response.body.data;
    if (Date.now() > deadline)
      throw new Error(`history of ${walletId} never matched: ${response.text.slice(0, 500)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
