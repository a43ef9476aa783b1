import type { App, Services } from "../types.ts";
import { registerCreateApiKey } from "./api-keys/create.ts";
import { registerListApiKeys } from "./api-keys/list.ts";
import { registerRevokeApiKey } from "./api-keys/revoke.ts";
import { registerLogin } from "./auth/login.ts";
import { registerRegister } from "./auth/register.ts";
import { registerListChains } from "./chains/list.ts";
import { registerHealthz } from "./health/healthz.ts";
import { registerGetPolicy } from "./policy/get.ts";
import { registerSetPolicyStatus } from "./policy/set-status.ts";
import { registerUpdatePolicy } from "./policy/update.ts";
import { registerSend } from "./spends/send.ts";
import { registerGetTransaction } from "./transactions/get.ts";
import { registerListTransactions } from "./transactions/list.ts";
import { registerArchiveWallet } from "./wallets/archive.ts";
import { registerGetBalance } from "./wallets/balance.ts";
import { registerCreateWallet } from "./wallets/create.ts";
import { registerFaucet } from "./wallets/faucet.ts";
import { registerGetWallet } from "./wallets/get.ts";
import { registerListWallets } from "./wallets/list.ts";

/** Every operation of the API, one file each under `routes/<resource>/<operation>.ts`. */
export function registerRoutes(app: App, services: Services): void {
  registerHealthz(app, services);
  registerRegister(app, services);
  registerLogin(app, services);
  registerCreateApiKey(app, services);
  registerListApiKeys(app, services);
  registerRevokeApiKey(app, services);
  registerCreateWallet(app, services);
  registerListWallets(app, services);
  registerGetWallet(app, services);
  registerArchiveWallet(app, services);
  registerGetBalance(app, services);
  registerFaucet(app, services);
  registerListChains(app, services);
  registerListTransactions(app, services);
  registerGetTransaction(app, services);
  registerSend(app, services);
  registerGetPolicy(app, services);
  registerUpdatePolicy(app, services);
  registerSetPolicyStatus(app, services);
}
