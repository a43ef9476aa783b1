import { DEFAULT_BASE_URL, type SpendAuthzConfig, SvcWallet } from "@svc/sdk";
import { parseDecimal } from "./decimal.ts";

/** The MCP server's settings, from its environment. */
export interface McpConfig {
  apiKey: string;
  baseUrl: string;
  authz?: SpendAuthzConfig;
  confirmAboveUsd?: string;
}

/**
 * Reads `SVC_API_KEY`, `SVC_BASE_URL` (default the local service), `SVC_AUTHZD_URL` / `SVC_AUTHZD_TOKEN` (the
 * SDK's spend-authorization gate, both or neither) and `SVC_MCP_CONFIRM_ABOVE` (USD). Throws a message fit
 * for stderr when a setting is wrong; no value is ever repeated in it.
 */
export function configFromEnv(env: NodeJS.ProcessEnv): McpConfig {
  const apiKey = env.SVC_API_KEY?.trim();
  if (!apiKey) throw new Error("SVC_API_KEY is not set: give the MCP server an Svc API key");
  const baseUrl = env.SVC_BASE_URL?.trim() || DEFAULT_BASE_URL;
  const gatewayUrl = env.SVC_AUTHZD_URL?.trim();
  const token = env.SVC_AUTHZD_TOKEN?.trim();
  if (Boolean(gatewayUrl) !== Boolean(token)) {
    throw new Error("SVC_AUTHZD_URL and SVC_AUTHZD_TOKEN go together: set both (the spend gate) or neither");
  }
  return {
    apiKey,
    baseUrl,
    ...(gatewayUrl && token ? { authz: { gatewayUrl, token } } : {}),
    ...confirmAboveFromEnv(env),
  };
}

/** `SVC_MCP_CONFIRM_ABOVE` checked: a non-negative decimal of US dollars, or unset. */
export function confirmAboveFromEnv(env: NodeJS.ProcessEnv): { confirmAboveUsd?: string } {
  const confirmAbove = env.SVC_MCP_CONFIRM_ABOVE?.trim();
  if (!confirmAbove) return {};
  if (parseDecimal(confirmAbove) === undefined) {
    throw new Error('SVC_MCP_CONFIRM_ABOVE must be an amount of US dollars, e.g. "5" or "0.50"');
  }
  return { confirmAboveUsd: confirmAbove };
}

/** The SDK client for a configuration. */
export function clientFor(config: McpConfig): SvcWallet {
  return new SvcWallet({
    apiKey: config.apiKey,
    baseUrl: config.baseUrl,
    ...(config.authz ? { authz: config.authz } : {}),
  });
}
