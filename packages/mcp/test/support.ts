/**
 * What the MCP tests share: a real service (in this process, on a real port, with the local chains and the
 * x402 demo) and MCP clients from `@modelcontextprotocol/sdk` connected to it over stdio (the `svc-mcp` bin
 * as a child process) or over streamable HTTP (the service's own `/mcp`).
 */
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  type CallToolResult,
  ElicitRequestSchema,
  type ElicitResult,
} from "@modelcontextprotocol/sdk/types.js";
import { fundEvm } from "@svc/devnet";
import { SvcWallet, type Wallet } from "@svc/sdk";
import {
  createTestServer,
  seedAccount,
  sharedDevnet,
  type TestServer,
} from "../../server/test/support/test-server.ts";

export const BIN = fileURLToPath(new URL("../bin/svc-mcp.js", import.meta.url));
export const USDC = 1_000_000n;
export const ETH = 10n ** 18n;

/** A service with an admin credential, a funded wallet (maxPerTx $10), a payee wallet, and keys of each role. */
export interface World {
  server: TestServer;
  baseUrl: string;
  admin: SvcWallet;
  adminKey: string;
  agentKey: string;
  readKey: string;
  payer: Wallet;
  payee: Wallet;
  /** The x402 demo resource `npm start` serves (0.01 USDC on base). */
  demoUrl: string;
  close(): Promise<void>;
}

export async function startWorld(env: Record<string, string> = {}): Promise<World> {
  const server = await createTestServer({ x402Demo: true, env });
  const account = await seedAccount(server.api, "mcp");
  const baseUrl = `${server.url}/v1`;
  const admin = new SvcWallet({ apiKey: account.accessToken, baseUrl });
  const payer = await admin.wallet.create({ name: "payer", chains: ["base"], policy: { maxPerTx: "10" } });
  const payee = await admin.wallet.create({ name: "payee", chains: ["base"] });
  await fundEvm(await sharedDevnet(), payer.evm?.address as `0x${string}`, { eth: ETH, usdc: 100n * USDC });
  const agent = await admin.apiKeys.create({ name: "agent", role: "agent", walletIds: [payer.id] });
  const reader = await admin.apiKeys.create({ name: "reader", role: "read" });
  const started = server.logs.lines.map((line) => JSON.parse(line)).find((line) => line.x402Demo);
  return {
    server,
    baseUrl,
    admin,
    adminKey: account.apiKey,
    agentKey: agent.key,
    readKey: reader.key,
    payer,
    payee,
    demoUrl: (started.x402Demo as { url: string }).url,
    close: () => server.close(),
  };
}

/** How the test's person answers a confirmation; undefined = the client cannot elicit at all. */
export type Person = ((message: string) => ElicitResult) | undefined;

function newClient(person: Person): Client {
  const client = new Client(
    { name: "svc-mcp-test", version: "0.0.0" },
    { capabilities: person === undefined ? {} : { elicitation: { form: {} } } },
  );
  if (person !== undefined) {
    client.setRequestHandler(ElicitRequestSchema, (request) => person(request.params.message));
  }
  return client;
}

/** An MCP client talking to the `svc-mcp` bin over stdio, with `env` on top of the credential. */
export async function stdioClient(
  world: World,
  apiKey: string,
  options: { person?: Person; env?: Record<string, string> } = {},
): Promise<Client> {
  const client = newClient(options.person);
  await client.connect(
    new StdioClientTransport({
      command: process.execPath,
      args: [BIN],
      env: { SVC_API_KEY: apiKey, SVC_BASE_URL: world.baseUrl, ...options.env },
      stderr: "inherit",
    }),
  );
  return client;
}

/** An MCP client talking to the service's `/mcp` (or `url`) with `apiKey` as its Bearer token. */
export async function httpClient(
  world: World,
  apiKey: string,
  person?: Person,
  url = `${world.server.url}/mcp`,
): Promise<Client> {
  const client = newClient(person);
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: { authorization: `Bearer ${apiKey}` } },
    }),
  );
  return client;
}

/** Calls a tool; the structured result, or the error's JSON facts when it failed. */
export async function call(
  client: Client,
  name: string,
  args: Record<string, unknown> = {},
): Promise<{ isError: boolean; structured: Record<string, unknown>; text: string }> {
  const result = (await client.callTool({ name, arguments: args })) as CallToolResult;
  const texts = result.content.filter((c) => c.type === "text").map((c) => c.text);
  if (result.isError) {
    const facts = texts.map((text) => {
      try {
        return JSON.parse(text) as { error?: Record<string, unknown> };
      } catch {
        return undefined;
      }
    });
    const error = facts.find((f) => f?.error)?.error ?? {};
    return { isError: true, structured: error, text: texts[0] ?? "" };
  }
  return { isError: false, structured: result.structuredContent ?? {}, text: texts[0] ?? "" };
}

/** The wallet's USDC on base, as the service reads it from the chain. */
export async function usdcOf(wallet: Wallet): Promise<string> {
  const { balances } = await wallet.balance();
  return balances.find((b) => b.chain === "base" && b.token === "USDC")?.amount ?? "0";
}

/** What a read key is offered: nothing that spends, pauses or asks the faucet. */
export const READ_TOOL_NAMES = [
  "discover_services",
  "get_balance",
  "get_policy",
  "get_transaction",
  "get_wallet",
  "list_transactions",
  "list_wallets",
];
export const AGENT_TOOL_NAMES = [
  ...READ_TOOL_NAMES,
  "fetch_paid",
  "pause_wallet",
  "request_faucet",
  "send",
].sort();
export const ADMIN_TOOL_NAMES = [
  ...AGENT_TOOL_NAMES,
  "create_agent_key",
  "create_wallet",
  "update_policy",
].sort();
