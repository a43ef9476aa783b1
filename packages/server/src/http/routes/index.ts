import type { App, Services } from "../types.ts";
import { registerCreateApiKey } from "./api-keys/create.ts";
import { registerListApiKeys } from "./api-keys/list.ts";
import { registerRevokeApiKey } from "./api-keys/revoke.ts";
import { registerDecideApproval } from "./approvals/decide.ts";
import { registerListApprovals } from "./approvals/list.ts";
import { registerLogin } from "./auth/login.ts";
import { registerLogout } from "./auth/logout.ts";
import { registerGetMe } from "./auth/me.ts";
import { registerRegister } from "./auth/register.ts";
import { registerListChains } from "./chains/list.ts";
import { registerListEvents } from "./events/list.ts";
import { registerHealthz } from "./healthz/get.ts";
import { registerGetTransaction } from "./transactions/get.ts";
import { registerArchiveWallet } from "./wallets/archive.ts";
import { registerGetBalance } from "./wallets/balance/get.ts";
import { registerCreateWallet } from "./wallets/create.ts";
import { registerFaucet } from "./wallets/faucet.ts";
import { registerGetWallet } from "./wallets/get.ts";
import { registerListWallets } from "./wallets/list.ts";
import { registerGetPolicy } from "./wallets/policy/get.ts";
import { registerSetPolicyStatus } from "./wallets/policy/set-status.ts";
import { registerUpdatePolicy } from "./wallets/policy/update.ts";
import { registerRestoreWallet } from "./wallets/restore.ts";
import { registerSend } from "./wallets/send.ts";
import { registerGetSpending } from "./wallets/spending/get.ts";
import { registerListTransactions } from "./wallets/transactions/list.ts";
import { registerCreateWebhookEndpoint } from "./webhook-endpoints/create.ts";
import { registerDeleteWebhookEndpoint } from "./webhook-endpoints/delete.ts";
import { registerListWebhookDeliveries } from "./webhook-endpoints/deliveries/list.ts";
import { registerGetWebhookEndpoint } from "./webhook-endpoints/get.ts";
import { registerListWebhookEndpoints } from "./webhook-endpoints/list.ts";
import { registerRedeliverWebhook } from "./webhook-endpoints/redeliver.ts";
import { registerRotateWebhookSecret } from "./webhook-endpoints/rotate-secret.ts";
import { registerX402Fetch } from "./x402/fetch.ts";
import { registerListX402Services } from "./x402/services.ts";

/**
 * Every operation of the API, one file each. The folder mirrors the URL without its version and its ids
 * (`GET /v1/wallets/:id/transactions` is `wallets/transactions/list.ts`); the file is named after the
 * operation: `list`, `get`, `create`, `update`, or the action the URL ends with (`wallets/send.ts` for
 * `POST /v1/wallets/:id/send`, `wallets/policy/set-status.ts` for `…/policy/pause` and `…/resume`,
 * `approvals/decide.ts` for `…/approve` and `…/reject`).
 */
export function registerRoutes(app: App, services: Services): void {
  registerHealthz(app, services);
  registerRegister(app, services);
  registerLogin(app, services);
  registerLogout(app, services);
  registerGetMe(app, services);
  registerCreateApiKey(app, services);
  registerListApiKeys(app, services);
  registerRevokeApiKey(app, services);
  registerCreateWallet(app, services);
  registerListWallets(app, services);
  registerGetWallet(app, services);
  registerArchiveWallet(app, services);
  registerRestoreWallet(app, services);
  registerGetBalance(app, services);
  registerGetSpending(app, services);
  registerFaucet(app, services);
  registerListChains(app, services);
  registerListTransactions(app, services);
  registerGetTransaction(app, services);
  registerSend(app, services);
  registerGetPolicy(app, services);
  registerUpdatePolicy(app, services);
  registerSetPolicyStatus(app, services);
  registerX402Fetch(app, services);
  registerListX402Services(app, services);
  registerListEvents(app, services);
  registerListApprovals(app, services);
  registerDecideApproval(app, services);
  registerCreateWebhookEndpoint(app, services);
  registerListWebhookEndpoints(app, services);
  registerGetWebhookEndpoint(app, services);
  registerDeleteWebhookEndpoint(app, services);
  registerListWebhookDeliveries(app, services);
  registerRedeliverWebhook(app, services);
  registerRotateWebhookSecret(app, services);
}
