import { SvcForbiddenError, type SvcWallet } from "@svc/sdk";

/** What the MCP server offers: every tool (`admin`), or the tools that never loosen anything (`agent`). */
export type ToolSet = "admin" | "agent";

/**
 * Checks the credential and finds which tool set it gets, by asking the service: listing wallets proves the
 * key works (a bad key throws `SvcUnauthorizedError`), and listing API keys answers only an admin credential
 * (403 `insufficient_role` otherwise). Agent and read keys both get the agent set: the service itself refuses
 * a read key's spends, and neither is offered a tool that creates wallets or keys or loosens a policy.
 * @example
 * const toolSet = await toolSetOf(new SvcWallet({ apiKey, baseUrl })); // "admin" | "agent"
 */
export async function toolSetOf(svc: SvcWallet): Promise<ToolSet> {
  await svc.wallet.list();
  try {
    await svc.apiKeys.list();
    return "admin";
  } catch (error) {
    if (error instanceof SvcForbiddenError) return "agent";
    throw error;
  }
}

/**
 * Whether the service serves a test network (local chains included): `request_faucet` is offered only then,
 * as the service's faucet refuses on mainnets.
 * @example
 * const faucet = await servesTestNetworks(svc);
 */
export async function servesTestNetworks(svc: SvcWallet): Promise<boolean> {
  return (await svc.chains.list()).some((chain) => chain.testnet);
}
