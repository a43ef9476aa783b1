import type { SvcWallet } from "@svc/sdk";

/**
 * What the MCP server offers: every tool (`admin`); the tools that never loosen anything (`agent`); the
 * tools that only read (`read`).
 */
export type ToolSet = "admin" | "agent" | "read";

/**
 * Checks the credential and finds which tool set it gets: the service says what the key is (`GET /v1/me`;
 * a bad key throws `SvcUnauthorizedError`), and its role is the tool set.
 * @example
 * const toolSet = await toolSetOf(new SvcWallet({ apiKey, baseUrl })); // "admin" | "agent" | "read"
 */
export async function toolSetOf(svc: SvcWallet): Promise<ToolSet> {
  return (await credentialOf(svc)).toolSet;
}

/**
 * {@link toolSetOf}, with the account the key belongs to.
 * @example
 * const { toolSet, accountId } = await credentialOf(svc); // "agent", "usr_…"
 */
export async function credentialOf(svc: SvcWallet): Promise<{ toolSet: ToolSet; accountId: string }> {
  const me = await svc.auth.me();
  return { toolSet: me.role, accountId: me.userId };
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
