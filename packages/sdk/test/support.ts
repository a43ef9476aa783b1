/**
 * What the SDK's end-to-end tests share: a real service (with local chains) and, where the gate is tested, a
 * real daemon process. Test-only: the SDK's source never imports the service.
 */

import { startTestDaemon, type TestDaemon } from "@svc/authzd/testing";
import { fundEvm, fundSolana } from "@svc/devnet";
import {
  createTestServer,
  seedAccount,
  sharedDevnet,
  type TestServer,
} from "../../server/test/support/test-server.ts";
import { type SpendAuthzConfig, SvcWallet, type SvcWalletOptions, type Wallet } from "../src/index.ts";
import { FaultProxy } from "./proxy.ts";

export { startTestDaemon, type TestDaemon } from "@svc/authzd/testing";
export { sharedDevnet } from "../../server/test/support/test-server.ts";

export const USDC = 1_000_000n;
export const ETH = 10n ** 18n;
export const SOL = 1_000_000_000n;

/** The capabilities the SDK's daemon identity needs: authorize, settle, and reading the audit in tests. */
export const AGENT_CAPABILITIES = ["wallet.spend.authorize", "wallet.spend.settle", "audit.read"];

/** A running service, its base URL for the SDK, and an admin client (the login access token). */
export interface World {
  server: TestServer;
  baseUrl: string;
  admin: SvcWallet;
  accessToken: string;
  /** A client with the given options on this service (apiKey defaults to the admin's). */
  client(options?: SvcWalletOptions): SvcWallet;
  close(): Promise<void>;
}

/** Starts a service (with `env`) and seeds an account whose access token is the admin credential. */
export async function startWorld(env: Record<string, string> = {}): Promise<World> {
  const server = await createTestServer({ env });
  const account = await seedAccount(server.api, "sdk");
  const baseUrl = `${server.url}/v1`;
  const admin = new SvcWallet({ apiKey: account.accessToken, baseUrl });
  return {
    server,
    baseUrl,
    admin,
    accessToken: account.accessToken,
    client: (options = {}) => new SvcWallet({ apiKey: account.accessToken, baseUrl, ...options }),
    close: () => server.close(),
  };
}

/** A daemon with spend authorization on, and the service configured to verify decisions with it. */
export interface GatedWorld extends World {
  daemon: TestDaemon;
  /** The daemon's address as the SDK and the service know it: a forwarder that survives a daemon restart. */
  daemonUrl: string;
  /** Token of the SDK's daemon identity (`agent`), holding {@link AGENT_CAPABILITIES}. */
  agentToken: string;
  /** Restarts the daemon on the same home (after `daemon.stop()` or not); `daemonUrl` keeps working. */
  restartDaemon(): Promise<void>;
  authz(extra?: Partial<SpendAuthzConfig>): SpendAuthzConfig;
}

/**
 * Starts a daemon (spend authorization enabled), an identity for the SDK, an identity for the service with
 * `wallet.spend.verify`, and the service configured with it (`SVC_AUTHZD_URL`, `SVC_AUTHZD_TOKEN`). Both
 * reach the daemon through a TCP forwarder, so a restarted daemon (on a new port) is found at the same URL.
 */
export async function startGatedWorld(env: Record<string, string> = {}): Promise<GatedWorld> {
  const daemon = await startTestDaemon();
  const forwarder = await FaultProxy.start(daemon.url);
  const agentToken = await daemon.identity("agent", AGENT_CAPABILITIES, { budgetCredits: 10_000_000 });
  const serviceToken = await daemon.identity("svc-service", ["wallet.spend.verify"]);
  const world = await startWorld({ SVC_AUTHZD_URL: forwarder.url, SVC_AUTHZD_TOKEN: serviceToken, ...env });
  return {
    ...world,
    daemon,
    daemonUrl: forwarder.url,
    agentToken,
    restartDaemon: async () => {
      await daemon.restart();
      forwarder.retarget(daemon.url);
    },
    authz: (extra = {}) => ({ gatewayUrl: forwarder.url, token: agentToken, ...extra }),
    close: async () => {
      await world.close();
      await forwarder.close();
      await daemon.stop({ removeHome: true });
    },
  };
}

/** A wallet on base and solana created by the admin, funded on chain with gas and USDC. */
export async function fundedWallet(
  admin: SvcWallet,
  policy: Record<string, unknown> = { maxPerTx: "100" },
  name = "payer",
): Promise<Wallet> {
  const wallet = await admin.wallet.create({ name, chains: ["base", "solana"], policy });
  const devnet = await sharedDevnet();
  await fundEvm(devnet, wallet.evm?.address as `0x${string}`, { eth: ETH, usdc: 500n * USDC });
  await fundSolana(devnet, wallet.solana?.address as never, { sol: 2n * SOL, usdc: 500n * USDC });
  return wallet;
}

/**
 * A `fetch` that counts the requests it passes on, by "METHOD path"; a paid fetch that only probes (asks the
 * resource, pays nothing) as "POST /v1/x402/fetch (probe)".
 */
export function countingFetch(): {
  fetch: (input: string, init: RequestInit) => Promise<Response>;
  calls: string[];
} {
  const calls: string[] = [];
  return {
    calls,
    fetch: (input, init) => {
      const probe = typeof init.body === "string" && init.body.includes('"probe":true') ? " (probe)" : "";
      calls.push(`${init.method ?? "GET"} ${new URL(input).pathname}${probe}`);
      return fetch(input, init);
    },
  };
}

/** The daemon's audit rows of one kind. */
export function auditRowsOf(daemon: TestDaemon, kind: string): Record<string, unknown>[] {
  return daemon.auditRows().filter((row) => row.kind === kind);
}
