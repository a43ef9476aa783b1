/**
 * The service's own `/mcp` (streamable HTTP): each request carries its API key as a Bearer token, checked
 * with the service. An MCP client from `@modelcontextprotocol/sdk` connects with a URL and a key.
 */

import { createServer } from "node:http";
import { type AddressInfo, connect } from "node:net";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { ServiceErrorBody } from "@svc/sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../../../test/support/eventually.ts";
import { createTestServer, seedAccount } from "../../server/test/support/test-server.ts";
import { createMcpHttpHandler } from "../src/http.ts";
import {
  ADMIN_TOOL_NAMES,
  AGENT_TOOL_NAMES,
  call,
  httpClient,
  READ_TOOL_NAMES,
  startWorld,
  usdcOf,
  type World,
} from "./support.ts";

let world: World;
const clients: Client[] = [];
const open = async (client: Promise<Client>) => {
  const connected = await client;
  clients.push(connected);
  return connected;
};
const INITIALIZE = {
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "curl", version: "0" } },
};

beforeAll(async () => {
  world = await startWorld({ SVC_MCP_CONFIRM_ABOVE: "5" });
});
afterAll(async () => {
  for (const client of clients) await client.close();
  await world?.close();
});

/**
 * The service's error shape (README: `{ "error": { "code", "message", "requestId", "reason"?, "details"? } }`),
 * its `requestId` the response's `X-Request-Id`; returns the error.
 */
async function expectError(
  response: Response,
  status: number,
  expected: { code: string; reason?: string },
): Promise<ServiceErrorBody["error"]> {
  expect(response.status).toBe(status);
  const requestId = response.headers.get("x-request-id");
  expect(requestId).toMatch(/^req_\w+$/);
  const body = (await response.json()) as ServiceErrorBody;
  expect(Object.keys(body)).toEqual(["error"]);
  expect(body.error).toMatchObject({ ...expected, requestId });
  expect(typeof body.error.message).toBe("string");
  for (const key of Object.keys(body.error)) {
    expect(["code", "message", "requestId", "reason", "details"]).toContain(key);
  }
  return body.error;
}

function post(headers: Record<string, string>, body: unknown = INITIALIZE): Promise<Response> {
  return fetch(`${world.server.url}/mcp`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      ...headers,
    },
    body: JSON.stringify(body),
  });
}

describe("/mcp over streamable HTTP", () => {
  it("answers 401 without a key and with a key the service refuses; nothing else", async () => {
    const none = await post({});
    expect(none.headers.get("www-authenticate")).toMatch(/^Bearer/);
    await expectError(none, 401, { code: "Unauthorized", reason: "missing_credentials" });
    // The same reason as /v1 for the same request.
    const v1 = await fetch(`${world.baseUrl}/wallets`);
    await expectError(v1, 401, { code: "Unauthorized", reason: "missing_credentials" });

    // A header that is not `Bearer <key>`: as /v1, invalid credentials.
    await expectError(await post({ authorization: "Basic dXNlcjpwYXNz" }), 401, {
      code: "Unauthorized",
      reason: "invalid_credentials",
    });

    // A key the service refuses: its reason, under this request's id (not the id of the check it made).
    const bad = await post({ authorization: "Bearer svc_not_a_real_key_0000000000000000" });
    const badError = await expectError(bad, 401, { code: "Unauthorized", reason: "invalid_credentials" });
    expect(JSON.stringify(badError)).not.toContain("svc_not_a_real_key");

    // The key is checked before the body is read: a bad key with a broken body is still 401.
    const broken = (headers: Record<string, string>) =>
      fetch(`${world.server.url}/mcp`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          ...headers,
        },
        body: "{not json",
      });
    await expectError(await broken({}), 401, { code: "Unauthorized", reason: "missing_credentials" });
    // A good key with a broken body: as /v1, a ValidationError `invalid_body`.
    await expectError(await broken({ authorization: `Bearer ${world.agentKey}` }), 400, {
      code: "ValidationError",
      reason: "invalid_body",
    });

    // A session that does not exist (ended, expired, or never opened).
    const unknown = await post(
      {
        authorization: `Bearer ${world.agentKey}`,
        "mcp-session-id": "00000000-0000-4000-8000-000000000000",
        "mcp-protocol-version": "2025-06-18",
      },
      { jsonrpc: "2.0", id: 2, method: "tools/list" },
    );
    await expectError(unknown, 404, { code: "NotFound", reason: "session_not_found" });

    // A revoked key is refused on its next request, even inside the session it opened.
    const temp = await world.admin.apiKeys.create({
      name: "temp",
      role: "agent",
      walletIds: [world.payer.id],
    });
    const opened = await post({ authorization: `Bearer ${temp.key}` });
    expect(opened.status).toBe(200);
    const sessionId = opened.headers.get("mcp-session-id") as string;
    expect(sessionId).toBeTruthy();
    await opened.text();
    // The session belongs to its key: another valid key may not use it.
    const other = await post(
      {
        authorization: `Bearer ${world.agentKey}`,
        "mcp-session-id": sessionId,
        "mcp-protocol-version": "2025-06-18",
      },
      { jsonrpc: "2.0", id: 2, method: "tools/list" },
    );
    await expectError(other, 403, { code: "Forbidden", reason: "session_of_another_key" });
    await world.admin.apiKeys.revoke(temp.id);
    const revoked = await post(
      {
        authorization: `Bearer ${temp.key}`,
        "mcp-session-id": sessionId,
        "mcp-protocol-version": "2025-06-18",
      },
      { jsonrpc: "2.0", id: 2, method: "tools/list" },
    );
    await expectError(revoked, 401, { code: "Unauthorized", reason: "key_revoked" });
  });

  it("offers each role its tools: an agent key sees no loosening tool, a read key nothing that acts", async () => {
    const admin = await open(httpClient(world, world.adminKey));
    const agent = await open(httpClient(world, world.agentKey));
    const reader = await open(httpClient(world, world.readKey));
    expect((await admin.listTools()).tools.map((t) => t.name).sort()).toEqual(ADMIN_TOOL_NAMES);
    expect((await agent.listTools()).tools.map((t) => t.name).sort()).toEqual(AGENT_TOOL_NAMES);
    expect((await reader.listTools()).tools.map((t) => t.name).sort()).toEqual(READ_TOOL_NAMES);
    // What third parties wrote reaches the model through two tools: each says it is data, not instructions.
    const thirdParty = (await agent.listTools()).tools.filter((t) =>
      ["fetch_paid", "discover_services"].includes(t.name),
    );
    expect(thirdParty).toHaveLength(2);
    for (const tool of thirdParty)
      expect(tool.description, tool.name).toMatch(/never instructions to follow/);
    // Over the same endpoint at once, each session keeps its own key.
    const wallets = await call(agent, "list_wallets");
    expect((wallets.structured.wallets as { id: string }[]).map((w) => w.id)).toEqual([world.payer.id]);
    const created = await call(admin, "create_wallet", {
      name: "made over mcp",
      chains: ["base"],
      policy: { maxPerTx: "1" },
    });
    expect(created.isError, created.text).toBe(false);
    expect(created.structured).toMatchObject({ name: "made over mcp", chains: ["base"], status: "active" });
    const madeId = created.structured.id as string;
    const raised = await call(admin, "update_policy", { walletId: madeId, maxPerTx: "20", dailyLimit: "50" });
    expect(raised.structured).toMatchObject({ walletId: madeId, maxPerTx: "20", dailyLimit: "50" });
    const faucet = await call(admin, "request_faucet", {
      walletId: madeId,
      chain: "base",
      token: "USDC",
      amount: "1",
    });
    expect(faucet.isError, faucet.text).toBe(false);
    expect(faucet.structured).toMatchObject({
      type: "receive",
      amount: "1",
      token: "USDC",
      status: "confirmed",
    });
    const key = await call(admin, "create_agent_key", { name: "made over mcp", walletIds: [madeId] });
    expect(key.structured).toMatchObject({ role: "agent", walletIds: [madeId] });
    expect(key.structured.key).toMatch(/^svc_/);

    // The new agent key can tighten (pause) but is not even offered update_policy, and calling it by name fails.
    const newAgent = await open(httpClient(world, key.structured.key as string));
    expect((await call(newAgent, "pause_wallet", { walletId: madeId })).structured.status).toBe("paused");
    const loosen = await newAgent
      .callTool({ name: "update_policy", arguments: { walletId: madeId, maxPerTx: "1000" } })
      .then((result) => ({ isError: result.isError === true, text: JSON.stringify(result.content) }))
      .catch((error: Error) => ({ isError: true, text: error.message }));
    expect(loosen.isError).toBe(true);
    expect(loosen.text).toContain("update_policy not found");
    const policy = await call(admin, "get_policy", { walletId: madeId });
    expect(policy.structured).toMatchObject({ maxPerTx: "20", status: "paused" });
  });

  it("sends within the policy (confirmed on chain), refuses over it with the PolicyViolation, pays x402", async () => {
    const agent = await open(httpClient(world, world.agentKey));
    const payeeBefore = await usdcOf(world.payee);
    const sent = await call(agent, "send", {
      walletId: world.payer.id,
      to: world.payee.evm?.address,
      amount: "2",
      chain: "base",
    });
    expect(sent.isError, sent.text).toBe(false);
    const confirmed = await eventually(
      async () => {
        const tx = await call(agent, "get_transaction", { transactionId: sent.structured.id });
        return tx.structured.status === "pending" ? undefined : tx;
      },
      { describe: "the send to leave pending" },
    );
    expect(confirmed.structured.status).toBe("confirmed");
    expect(Number(await usdcOf(world.payee))).toBe(Number(payeeBefore) + 2);

    const policy = await call(agent, "get_policy", { walletId: world.payer.id });
    expect(policy.structured).toMatchObject({ maxPerTx: "10", status: "active" });

    const paid = await call(agent, "fetch_paid", {
      walletId: world.payer.id,
      url: world.demoUrl,
      maxAmount: "0.05",
    });
    expect(paid.isError, paid.text).toBe(false);
    expect(paid.structured).toMatchObject({
      status: 200,
      amountCharged: "0.01",
      transaction: { status: "confirmed" },
    });
  });

  it("above the threshold asks the person: accepted pays, declined moves nothing; over the limit still refused", async () => {
    let answer: "accept" | "decline" = "accept";
    const asked: string[] = [];
    const agent = await open(
      httpClient(world, world.agentKey, (message) => {
        asked.push(message);
        return answer === "accept" ? { action: "accept", content: { confirm: true } } : { action: "decline" };
      }),
    );
    const send = (amount: string) =>
      call(agent, "send", { walletId: world.payer.id, to: world.payee.evm?.address, amount, chain: "base" });
    const payerBefore = await usdcOf(world.payer);

    const accepted = await send("6");
    expect(accepted.isError, accepted.text).toBe(false);
    expect(asked).toHaveLength(1);
    await eventually(
      async () =>
        (await call(agent, "get_transaction", { transactionId: accepted.structured.id })).structured
          .status === "confirmed",
      { describe: "the accepted send to be confirmed" },
    );
    expect(Number(await usdcOf(world.payer))).toBe(Number(payerBefore) - 6);

    answer = "decline";
    const declined = await send("7");
    expect(declined.structured).toMatchObject({
      code: "ConfirmationRequired",
      reason: "confirmation_declined",
    });
    expect(asked).toHaveLength(2);
    expect(Number(await usdcOf(world.payer))).toBe(Number(payerBefore) - 6);
    const history = await call(agent, "list_transactions", { walletId: world.payer.id, type: "send" });
    expect((history.structured.data as { amount: string }[]).map((t) => t.amount)).not.toContain("7");

    // Confirmed by the person, refused by the policy: the person does not lift the limit.
    answer = "accept";
    const over = await send("25");
    expect(over.isError).toBe(true);
    expect(over.structured).toMatchObject({ code: "PolicyViolation", reason: "max_per_tx" });
    expect(over.text).toBe("Per-transaction limit of $10.00 exceeded: this spend is $25.00");

    // A client without elicitation is refused, saying why.
    const mute = await open(httpClient(world, world.agentKey));
    const refused = await call(mute, "send", {
      walletId: world.payer.id,
      to: world.payee.evm?.address,
      amount: "6",
      chain: "base",
    });
    expect(refused.structured.reason).toBe("confirmation_unavailable");
  });
});

describe("open sessions, bounded", () => {
  /**
   * Runs `use` against the handler as the service mounts it, with small bounds: `connect` opens a session with
   * a key, `alive` says whether a session still answers.
   */
  async function withBoundedHandler(
    bounds: { maxSessions: number; maxSessionsPerKey: number },
    use: (tools: {
      url: string;
      connect: (key: string) => Promise<Client>;
      alive: (client: Client) => Promise<boolean>;
    }) => Promise<void>,
  ): Promise<void> {
    const mcp = createMcpHttpHandler({ baseUrl: `${world.server.url}/v1`, ...bounds });
    const endpoint = createServer((request, response) => void mcp.handle(request, response));
    await new Promise<void>((resolve) => endpoint.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(endpoint.address() as AddressInfo).port}/mcp`;
    try {
      await use({
        url,
        connect: (key) => open(httpClient(world, key, undefined, url)),
        alive: (client) =>
          call(client, "list_wallets").then(
            (result) => !result.isError,
            () => false,
          ),
      });
    } finally {
      await mcp.close();
      endpoint.closeAllConnections();
      await new Promise((resolve) => endpoint.close(resolve));
    }
  }

  it("a key opening many sessions closes only its own: another key's session stays open", async () => {
    // 2 sessions a key, 3 in all.
    await withBoundedHandler({ maxSessions: 3, maxSessionsPerKey: 2 }, async ({ connect, alive }) => {
      const read = [await connect(world.readKey), await connect(world.readKey)];
      const agent = await connect(world.agentKey);
      // Full (3 of 3): a third key's session takes the place of the largest holder's oldest.
      const admin = await connect(world.adminKey);
      expect(await Promise.all([...read, agent, admin].map(alive))).toEqual([false, true, true, true]);

      // The read key opening many more closes only its own: the others stay open.
      for (let i = 0; i < 5; i++) read.push(await connect(world.readKey));
      expect(await alive(agent)).toBe(true);
      expect(await alive(admin)).toBe(true);
      expect((await Promise.all(read.map(alive))).filter(Boolean)).toHaveLength(1);
      expect(await alive(read.at(-1) as Client)).toBe(true);
    });
  });

  it("a request that opens no session (a GET, a call before initialize) is 400 session_required and closes none", async () => {
    await withBoundedHandler({ maxSessions: 3, maxSessionsPerKey: 2 }, async ({ url, connect, alive }) => {
      const sessions = [await connect(world.readKey), await connect(world.readKey)];
      const headers = {
        authorization: `Bearer ${world.readKey}`,
        accept: "application/json, text/event-stream",
        "content-type": "application/json",
      };
      const toolsList = { jsonrpc: "2.0", id: 7, method: "tools/list" };
      const answers = [
        await fetch(url, { method: "GET", headers }),
        await fetch(url, { method: "DELETE", headers }),
        await fetch(url, { method: "POST", headers, body: JSON.stringify(toolsList) }),
        await fetch(url, { method: "POST", headers, body: JSON.stringify([toolsList]) }),
      ];
      for (const answer of answers) {
        expect(answer.status).toBe(400);
        const body = (await answer.json()) as ServiceErrorBody;
        expect(body.error).toMatchObject({ code: "ValidationError", reason: "session_required" });
        expect(body.error.message).toContain("Mcp-Session-Id");
      }
      // Before, each made room for a session it never opened: the key's oldest was closed.
      expect(await Promise.all(sessions.map(alive))).toEqual([true, true]);
    });
  });

  it("another account's many keys, a session each, close their own account's sessions, not this one's", async () => {
    await withBoundedHandler({ maxSessions: 4, maxSessionsPerKey: 2 }, async ({ connect, alive }) => {
      const other = await seedAccount(world.server.api, "many-keys");
      const keys = [other.apiKey];
      for (let i = 0; i < 4; i++) {
        const made = await world.server.api.post(
          "/v1/api-keys",
          { name: `k${i}`, role: "read" },
          other.apiKey,
        );
        keys.push(made.body.key as string);
      }
      // This account's one session is the oldest; the other account fills the table, one session a key.
      const mine = await connect(world.readKey);
      const theirs = [];
      for (const key of keys) theirs.push(await connect(key));
      expect(await alive(mine)).toBe(true);
      expect((await Promise.all(theirs.map(alive))).filter(Boolean)).toHaveLength(3);
    });
  });
});

describe("/mcp under the service's rate limits", () => {
  /**
   * A POST to /mcp from `address` (the service trusts 127.0.0.1 as its proxy: X-Forwarded-For); an initialize
   * request unless told. One left waiting fails the test after 15 s: a refusal is answered at once.
   */
  const initialize = (
    url: string,
    address: string,
    key: string,
    headers: Record<string, string> = {},
    body: unknown = INITIALIZE,
  ) =>
    fetch(`${url}/mcp`, {
      method: "POST",
      signal: AbortSignal.timeout(15_000),
      headers: {
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        "x-forwarded-for": address,
        authorization: `Bearer ${key}`,
        ...headers,
      },
      body: JSON.stringify(body),
    });

  it("one address's requests do not use up another's: the service's own calls count for the client they serve", async () => {
    const perAddress = 12;
    const server = await createTestServer({
      env: { SVC_TRUST_PROXY: "127.0.0.1", SVC_RATE_LIMIT_PER_ADDRESS_PER_MINUTE: String(perAddress) },
    });
    try {
      const { apiKey } = await seedAccount(server.api, "limits");
      // Made-up keys from one address: refused, until that address is over its limit.
      let refused = await initialize(server.url, "203.0.113.9", "svc_made_up_0");
      for (let i = 1; refused.status === 401 && i <= perAddress; i++) {
        await refused.text();
        refused = await initialize(server.url, "203.0.113.9", `svc_made_up_${i}`);
      }
      await expectError(refused, 429, { code: "RateLimitExceeded" });
      // Another client, on another address, with a good key: served (it was 502 once the /mcp endpoint's own
      // calls to the service, all from loopback, had used up loopback's limit, or after a wait of a minute).
      const served = await initialize(server.url, "198.51.100.7", apiKey);
      expect(served.status).toBe(200);
      await served.text();
      // The first address stays over its limit whatever it claims: the marks of the service's own calls
      // name the client they serve, but only with the secret the process made.
      const forged = await fetch(`${server.url}/v1/wallets`, {
        headers: {
          authorization: `Bearer ${apiKey}`,
          "x-forwarded-for": "203.0.113.9",
          "x-svc-own-request": "A".repeat(43),
          "x-svc-own-request-for": "198.51.100.99",
        },
      });
      await expectError(forged, 429, { code: "RateLimitExceeded" });
    } finally {
      await server.close();
    }
  });

  it("a batch of tool calls in one request counts each call for the client's address", async () => {
    const server = await createTestServer({
      env: { SVC_TRUST_PROXY: "127.0.0.1", SVC_RATE_LIMIT_PER_ADDRESS_PER_MINUTE: "30" },
    });
    try {
      const { apiKey } = await seedAccount(server.api, "limits");
      const address = "203.0.113.20";
      // Batches are JSON-RPC's, which MCP carried up to protocol 2025-03-26 (the SDK still accepts them).
      const opened = await initialize(
        server.url,
        address,
        apiKey,
        {},
        {
          ...INITIALIZE,
          params: { ...INITIALIZE.params, protocolVersion: "2025-03-26" },
        },
      );
      expect(opened.status).toBe(200);
      await opened.text();
      const session = {
        "mcp-session-id": opened.headers.get("mcp-session-id") as string,
        "mcp-protocol-version": "2025-03-26",
      };
      await (
        await initialize(server.url, address, apiKey, session, {
          jsonrpc: "2.0",
          method: "notifications/initialized",
        })
      ).text();
      const calls = Array.from({ length: 40 }, (_, i) => ({
        jsonrpc: "2.0",
        id: 10 + i,
        method: "tools/call",
        params: { name: "list_wallets", arguments: {} },
      }));
      const batch = await initialize(server.url, address, apiKey, session, calls);
      expect(batch.status).toBe(200);
      // The calls past the address's limit were refused, each as a tool error the agent can read.
      expect(await batch.text()).toContain("RateLimitExceeded");
      const direct = await fetch(`${server.url}/v1/wallets`, {
        headers: { authorization: `Bearer ${apiKey}`, "x-forwarded-for": address },
      });
      await expectError(direct, 429, { code: "RateLimitExceeded" });
    } finally {
      await server.close();
    }
  });

  it("a key over its own limit: 429 with Retry-After, as /v1 answers it, at once (not a 502, not a wait)", async () => {
    const server = await createTestServer({ env: { SVC_RATE_LIMIT_PER_MINUTE: "8" } });
    try {
      const { apiKey } = await seedAccount(server.api, "limits");
      let response = await initialize(server.url, "198.51.100.7", apiKey);
      for (let i = 0; response.status === 200 && i < 10; i++) {
        await response.text();
        response = await initialize(server.url, "198.51.100.7", apiKey);
      }
      const retryAfter = Number(response.headers.get("retry-after"));
      const error = await expectError(response, 429, { code: "RateLimitExceeded" });
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(error.details).toEqual({ scope: "credential", retryAfterSeconds: retryAfter });
      expect(JSON.stringify(error)).not.toContain(apiKey);
      // /v1 answers the same key the same way.
      const v1 = await fetch(`${server.url}/v1/wallets`, { headers: { authorization: `Bearer ${apiKey}` } });
      await expectError(v1, 429, { code: "RateLimitExceeded" });
    } finally {
      await server.close();
    }
  });
});

describe("JSON-RPC ids in a session", () => {
  /** A JSON-RPC message as it comes off the wire. */
  type Message = {
    id?: string | number | null;
    method?: string;
    result?: Record<string, unknown>;
    error?: { code: number; message: string; data?: unknown };
  };

  /** The JSON-RPC messages of an SSE body as they arrive; returns when the server ends the stream. */
  async function* sseMessages(response: Response): AsyncGenerator<Message> {
    const reader = (response.body as ReadableStream<Uint8Array>)
      .pipeThrough(new TextDecoderStream())
      .getReader();
    let buffer = "";
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      buffer += value;
      for (let end = buffer.indexOf("\n\n"); end >= 0; end = buffer.indexOf("\n\n")) {
        const data = buffer
          .slice(0, end)
          .split("\n")
          .filter((line) => line.startsWith("data:"))
          .map((line) => line.slice(5).trim())
          .join("\n");
        buffer = buffer.slice(end + 2);
        if (data !== "") yield JSON.parse(data) as Message;
      }
    }
  }

  /** Every message of an SSE body, once the server has ended it. */
  async function allOf(response: Response): Promise<Message[]> {
    const messages: Message[] = [];
    for await (const message of sseMessages(response)) messages.push(message);
    return messages;
  }

  /**
   * An MCP session over plain HTTP, so the test chooses each message's id; a client that can confirm (elicit).
   * Each request of the test is bounded by `stop` (aborted when the test ends) and by 60 s: one the server
   * never ends fails the test rather than hanging it.
   */
  async function rawSession(
    key: string,
    stop: AbortSignal,
    protocolVersion = "2025-06-18",
    url = `${world.server.url}/mcp`,
  ) {
    const signal = () => AbortSignal.any([stop, AbortSignal.timeout(60_000)]);
    const headers = (more: Record<string, string> = {}) => ({
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      authorization: `Bearer ${key}`,
      ...more,
    });
    const opened = await fetch(url, {
      method: "POST",
      signal: signal(),
      headers: headers(),
      body: JSON.stringify({
        ...INITIALIZE,
        params: { ...INITIALIZE.params, protocolVersion, capabilities: { elicitation: { form: {} } } },
      }),
    });
    expect(opened.status).toBe(200);
    await opened.text();
    const session = {
      "mcp-session-id": opened.headers.get("mcp-session-id") as string,
      "mcp-protocol-version": protocolVersion,
    };
    const post = (body: unknown) =>
      fetch(url, {
        method: "POST",
        signal: signal(),
        headers: headers(session),
        body: JSON.stringify(body),
      });
    expect((await post({ jsonrpc: "2.0", method: "notifications/initialized" })).status).toBe(202);
    return { post };
  }

  const toolCall = (id: string | number, name: string, args: Record<string, unknown> = {}) => ({
    jsonrpc: "2.0",
    id,
    method: "tools/call",
    params: { name, arguments: args },
  });
  const sendOf = (amount: string) => ({
    walletId: world.payer.id,
    to: world.payee.evm?.address,
    amount,
    chain: "base",
  });
  const sentAmounts = async () =>
    (await world.payer.transactions({ type: "send", limit: 100 })).data.map((tx) => tx.amount);

  it("a call naming an id in progress in its session is refused before it runs; the first keeps its answer; another session's is served", async () => {
    const stop = new AbortController();
    try {
      const mine = await rawSession(world.agentKey, stop.signal);
      // A send above the confirmation threshold stays in progress until the person answers, asked on the
      // call's own response.
      const first = await mine.post(toolCall(7, "send", sendOf("6")));
      expect(first.status).toBe(200);
      const firstMessages = sseMessages(first);
      const ask = (await firstMessages.next()).value as Message;
      expect(ask.method).toBe("elicitation/create");

      // The same id while it is in progress: a send under the threshold, which would pay at once if it ran.
      const second = await mine.post(toolCall(7, "send", sendOf("1.23")));
      expect(second.status).toBe(409);
      expect(second.headers.get("content-type")).toMatch(/^application\/json/);
      expect(await second.json()).toEqual({
        jsonrpc: "2.0",
        id: 7,
        error: {
          code: -32600,
          message: "Invalid Request: a request with this id is already in progress in this session",
        },
      });
      // So is a batch naming it beside a new id: none of the batch runs.
      const batch = await mine.post([toolCall(8, "send", sendOf("1.24")), toolCall(7, "list_wallets")]);
      expect(batch.status).toBe(409);
      expect(await batch.json()).toEqual({
        jsonrpc: "2.0",
        id: null,
        error: {
          code: -32600,
          message: "Invalid Request: a request with this id is already in progress in this session",
          data: { id: 7 },
        },
      });

      // Another session's id 7 is its own: served at once, with its own answer.
      const other = await rawSession(world.agentKey, stop.signal);
      const listed = await allOf(await other.post(toolCall(7, "list_wallets")));
      expect(listed).toHaveLength(1);
      expect(listed[0]?.id).toBe(7);
      expect(JSON.stringify(listed[0]?.result?.structuredContent)).toContain(world.payer.id);

      // The person declines: the first call's own answer, on its own response, which then ends.
      const declined = await mine.post({ jsonrpc: "2.0", id: ask.id, result: { action: "decline" } });
      expect(declined.status).toBe(202);
      const answers: Message[] = [];
      for await (const message of firstMessages) answers.push(message);
      expect(answers).toHaveLength(1);
      expect(answers[0]?.id).toBe(7);
      expect(JSON.stringify(answers[0]?.result)).toContain("confirmation_declined");

      // Answered, the id is free again in the session.
      const again = await allOf(await mine.post(toolCall(7, "get_balance", { walletId: world.payer.id })));
      expect(again.map((message) => message.id)).toEqual([7]);
      expect(again[0]?.result?.structuredContent).toMatchObject({ walletId: world.payer.id });
      // Nothing refused ran: no money moved for it.
      expect(await sentAmounts()).not.toContain("1.23");
      expect(await sentAmounts()).not.toContain("1.24");
    } finally {
      stop.abort();
    }
  });

  it("a client that never opens the session's stream is asked to confirm on the call's own response, and its answer is heard", async () => {
    const stop = new AbortController();
    try {
      const mine = await rawSession(world.agentKey, stop.signal);
      // No GET: the streamable HTTP spec lets a client do without one.
      const call = await mine.post(toolCall("no-stream", "send", sendOf("6.01")));
      expect(call.status).toBe(200);
      const messages = sseMessages(call);
      const ask = (await messages.next()).value as Message;
      expect(ask.method).toBe("elicitation/create");
      const accepted = await mine.post({
        jsonrpc: "2.0",
        id: ask.id,
        result: { action: "accept", content: { confirm: true } },
      });
      expect(accepted.status).toBe(202);
      const answer = (await messages.next()).value as Message;
      expect(answer.id).toBe("no-stream");
      expect(answer.result?.isError).not.toBe(true);
      expect(await sentAmounts()).toContain("6.01");
    } finally {
      stop.abort();
    }
  });

  it("a batch naming one id twice is refused whole, before any of it runs; one with distinct ids answers each", async () => {
    const stop = new AbortController();
    try {
      // Batches are JSON-RPC's, which MCP carried up to protocol 2025-03-26 (the SDK still accepts them).
      const session = await rawSession(world.agentKey, stop.signal, "2025-03-26");
      const twice = await session.post([
        toolCall("b", "send", sendOf("1.25")),
        toolCall("b", "get_balance", { walletId: world.payer.id }),
      ]);
      expect(twice.status).toBe(400);
      expect(await twice.json()).toEqual({
        jsonrpc: "2.0",
        id: null,
        error: {
          code: -32600,
          message: "Invalid Request: the batch has two requests with the same id",
          data: { id: "b" },
        },
      });
      expect(await sentAmounts()).not.toContain("1.25");

      // An id and the same number as a string are two ids (as JSON-RPC and the transport tell them apart).
      const distinct = await allOf(
        await session.post([
          toolCall(5, "get_balance", { walletId: world.payer.id }),
          toolCall("5", "list_wallets"),
        ]),
      );
      const byId = new Map(distinct.map((message) => [message.id, message]));
      expect(byId.size).toBe(2);
      expect(byId.get(5)?.result?.structuredContent).toMatchObject({ walletId: world.payer.id });
      expect(byId.get("5")?.result?.structuredContent).toHaveProperty("wallets");
    } finally {
      stop.abort();
    }
  });

  it("mounted without the body read, the endpoint reads it (up to 4 MiB) and checks its ids the same", async () => {
    const mcp = createMcpHttpHandler({ baseUrl: `${world.server.url}/v1` });
    const endpoint = createServer((request, response) => void mcp.handle(request, response));
    await new Promise<void>((resolve) => endpoint.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(endpoint.address() as AddressInfo).port}/mcp`;
    const stop = new AbortController();
    try {
      const session = await rawSession(world.agentKey, stop.signal, "2025-03-26", url);
      const twice = await session.post([toolCall(1, "list_wallets"), toolCall(1, "list_wallets")]);
      expect(twice.status).toBe(400);
      expect(await twice.json()).toMatchObject({ id: null, error: { code: -32600, data: { id: 1 } } });
      const listed = await allOf(await session.post(toolCall(1, "list_wallets")));
      expect(listed.map((message) => message.id)).toEqual([1]);
      // A batch over the transport's bound (100) is refused by the transport, unread: none of it runs.
      const many = await session.post(Array.from({ length: 101 }, () => toolCall(3, "list_wallets")));
      expect(many.status).toBe(400);
      expect(((await many.json()) as Message).error?.message).toContain("must not exceed 100");
      expect((await allOf(await session.post(toolCall(3, "list_wallets")))).map((m) => m.id)).toEqual([3]);

      const huge = await fetch(url, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          authorization: `Bearer ${world.agentKey}`,
        },
        body: JSON.stringify({ ...toolCall(2, "list_wallets"), pad: "x".repeat(4 * 1024 * 1024) }),
      });
      expect(huge.status).toBe(413);
      expect(await huge.json()).toMatchObject({
        error: { code: "ValidationError", reason: "body_too_large" },
      });
    } finally {
      stop.abort();
      await mcp.close();
      endpoint.closeAllConnections();
      await new Promise((resolve) => endpoint.close(resolve));
    }
  });
});

describe("a request the service's HTTP parser refuses, on a connection whose /mcp stream is open", () => {
  it("writes no answer into that stream (it would land inside its body): the connection closes", async () => {
    const initialized = await post({ authorization: `Bearer ${world.agentKey}` });
    expect(initialized.status).toBe(200);
    await initialized.text();
    const session = initialized.headers.get("mcp-session-id") as string;
    const notified = await post(
      {
        authorization: `Bearer ${world.agentKey}`,
        "mcp-session-id": session,
        "mcp-protocol-version": "2025-06-18",
      },
      { jsonrpc: "2.0", method: "notifications/initialized" },
    );
    expect(notified.status).toBe(202);
    // The session's stream, on a connection of the test's own: its response begins, and stays open.
    const { hostname, port } = new URL(world.server.url);
    const socket = connect(Number(port), hostname);
    socket.setTimeout(15_000, () => socket.destroy());
    let received = "";
    const headed = new Promise<void>((resolve) =>
      socket.on("data", (chunk) => {
        received += chunk;
        if (received.includes("\r\n\r\n")) resolve();
      }),
    );
    const closed = new Promise<void>((resolve) => socket.on("close", () => resolve()));
    socket.write(
      `GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${world.agentKey}\r\n` +
        `Accept: text/event-stream\r\nMcp-Session-Id: ${session}\r\nMcp-Protocol-Version: 2025-06-18\r\n\r\n`,
    );
    await headed;
    expect(received).toMatch(/^HTTP\/1\.1 200 /);
    const head = received;
    // Then, on the same connection, bytes that are no request.
    socket.write("GARBAGE\r\n\r\n");
    await closed;
    expect(received.slice(head.length)).not.toContain("HTTP/1.1");
  });
});
