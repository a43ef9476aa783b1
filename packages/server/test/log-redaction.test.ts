import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "./support/eventually.ts";
import { type RpcProxy, startRpcProxy } from "./support/rpc-proxy.ts";
import { createTestServer, seedAccount, sharedDevnet, type TestServer } from "./support/test-server.ts";

/** What a hosted RPC endpoint's URL carries: the provider's API key, as the last path segment. */
const RPC_SECRET = "k3yOfTheRpcPr0vider9xQeWvG816bUx";

let proxies: RpcProxy[] = [];
let failing = false;
let server: TestServer;

beforeAll(async () => {
  const devnet = await sharedDevnet();
  // Real endpoints behind proxies that, once `failing`, answer every call 503 as an overloaded provider would.
  const decide = () => (failing ? { status: 503 } : "forward");
  proxies = [
    await startRpcProxy(devnet.evm.rpcUrl, decide),
    await startRpcProxy(devnet.solana.rpcUrl, decide),
  ];
  server = await createTestServer({
    env: {
      SVC_RPC_BASE: `${proxies[0]?.url}/v2/${RPC_SECRET}`,
      SVC_USDC_BASE: devnet.evm.usdc,
      SVC_RPC_SOLANA: `${proxies[1]?.url}/?api-key=${RPC_SECRET}`,
      SVC_USDC_SOLANA: devnet.solana.usdcMint,
    },
  });
});
afterAll(async () => {
  await server?.close();
  await Promise.all(proxies.map((proxy) => proxy.close()));
});

/**
 * The log's redaction, proven by requests that would leak without it. A provider's key in the RPC URL is
 * what a failing chain call would write: viem puts the URL in its error messages, which the error handler
 * and the background workers log with their causes (`scrubRpcUrl` takes it out; this test fails without).
 * The JSON paths pino redacts (`REDACTED_LOG_PATHS`) stay as a second guard: no log call of the service
 * writes a request's headers or body (operability.test.ts proves the password, key and token never appear).
 */
describe("an RPC endpoint's key (in its URL)", () => {
  it("appears in no answer and no log line when the endpoint fails, for a request or in the background", async () => {
    const { apiKey } = await seedAccount(server.api);
    const wallet = await server.api.post("/v1/wallets", { name: "w", chains: ["base", "solana"] }, apiKey);
    expect(wallet.status).toBe(201);
    failing = true;
    try {
      const answers = [
        await server.api.get(`/v1/wallets/${wallet.body.id}/balance`, apiKey),
        await server.api.post(
          `/v1/wallets/${wallet.body.id}/send`,
          { to: "0x000000000000000000000000000000000000dEaD", amount: "1", chain: "base" },
          apiKey,
        ),
        await server.api.post(
          `/v1/wallets/${wallet.body.id}/send`,
          { to: wallet.body.solana.address, amount: "1", chain: "solana", token: "SOL" },
          apiKey,
        ),
      ];
      for (const answer of answers) {
        expect(answer.status, answer.text).toBe(502);
        expect(answer.text).not.toContain(RPC_SECRET);
      }
      // The background watcher meets the failing endpoints too, and logs each failure with its cause chain.
      await eventually(
        () => server.logs.lines.filter((line) => line.includes("incoming-transfer")).length >= 2,
        { describe: "the watcher to log the failing endpoints" },
      );
      const failures = server.logs.lines.filter((line) => line.includes('"err"'));
      expect(failures.length).toBeGreaterThan(0);
      expect(failures.some((line) => line.includes("503"))).toBe(true);
      expect(server.logs.text()).not.toContain(RPC_SECRET);
    } finally {
      failing = false;
    }
  });
});

describe("a credential a client puts in the URL", () => {
  it("is refused, and written in no log line: the query's values are left out of the request's line", async () => {
    const { apiKey, accessToken } = await seedAccount(server.api);
    const refused = [
      await server.api.get(`/v1/wallets?api_key=${apiKey}`),
      await server.api.get(`/v1/events?access_token=${accessToken}&limit=5`),
    ];
    for (const answer of refused) expect(answer.status).toBe(401);
    const lines = server.logs.lines.filter(
      (line) => line.includes("/v1/events?") || line.includes("/v1/wallets?"),
    );
    // The request is still on record, by its path and the names of its query.
    expect(lines.some((line) => line.includes("/v1/events?access_token=[Redacted]&limit=[Redacted]"))).toBe(
      true,
    );
    expect(server.logs.text()).not.toContain(apiKey);
    expect(server.logs.text()).not.toContain(accessToken);
  });

  it("written in no log line when it stands in the query as a name, not a value (it was written whole)", async () => {
    const { apiKey, accessToken } = await seedAccount(server.api);
    for (const path of [
      `/v1/wallets?${apiKey}`,
      `/v1/wallets?${accessToken}&x=1`,
      `/healthz?token;${apiKey}`,
      `/v1/wallets?%73vc_${apiKey.slice(4)}`,
    ])
      await server.api.get(path);
    const text = server.logs.text();
    expect(text).not.toContain(apiKey.slice(4));
    expect(text).not.toContain(accessToken);
    expect(text).toContain('"url":"/v1/wallets?[Redacted]&x=[Redacted]"');
  });

  it("written in no log line when it is in the path either, also percent-encoded: the rest of the path stays", async () => {
    const { apiKey, accessToken } = await seedAccount(server.api);
    const webhookSecret = `whsec_${"A".repeat(32)}`;
    const encodedKey = apiKey.replace("svc_", "svc%5F");
    const paths = [
      `/v1/${apiKey}`,
      `/v1/wallets;k=${apiKey}`,
      `/v1/wallets/${accessToken}/balance`,
      `/v1/${encodedKey}`,
      `/v1/hooks/${webhookSecret}`,
      // Forms a review found written whole: other characters before it, other letters encoded.
      `/v1/wallets/${apiKey.replace("s", "%73")}`,
      `/v1/wallets%2F${apiKey}`,
      `/v1/wallets/key%3D${apiKey}`,
      `/v1/wallets/x.${apiKey}`,
      `/v1/wallets/(${apiKey})`,
      `/v1/wallets/%09${apiKey}`,
    ];
    for (const path of paths) expect((await server.api.get(path)).status).toBeGreaterThanOrEqual(400);
    const text = server.logs.text();
    for (const secret of [apiKey.slice(4), accessToken, webhookSecret.slice(6), encodedKey.slice(6)])
      expect(text).not.toContain(secret);
    expect(text).toContain('"url":"/v1/wallets/[Redacted]/balance"');
    expect(text).toContain('"url":"/v1/wallets;k=[Redacted]"');
    // An id that merely holds such letters is written whole.
    expect((await server.api.get("/v1/wallets/wal_AAAAAAAAAAAAAAAAAAeyJA", apiKey)).status).toBe(404);
    expect(server.logs.text()).toContain('"url":"/v1/wallets/wal_AAAAAAAAAAAAAAAAAAeyJA"');
  });
});
