/**
 * `npm run bench -w packages/sdk`: the SDK's own cost per `send`, gate off vs gate on, in one run.
 *
 * The service is a stub HTTP server on loopback that answers `send` at once, so the figures are the SDK's
 * (and the network's), not the chain's; the daemon is the real one, as a child process, syncing every
 * verdict. Modes run interleaved in rounds so machine noise hits them alike. Prints figures; asserts nothing.
 *   raw       one fetch POST to the stub (the floor: one loopback round trip)
 *   gate off  wallet.send → stub
 *   gate on   wallet.send → daemon authorize → stub → daemon settle
 *   daemon    SpendAuthzClient.authorize + settle by hand (the gate's two round trips alone)
 */
import http from "node:http";
import os from "node:os";
import { startTestDaemon } from "@svc/authzd/testing";
import { SpendAuthzClient, SvcWallet } from "../src/index.ts";

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 20);
const PER_ROUND = Number(process.env.BENCH_PER_ROUND ?? 50);
const WALLET = "wal_bench000000000000000000";
const NETWORK = "eip155:31337";
const USDC = "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512";
const TO = "0xc2027Ae79f62166f66a0DE438ed089D71d8ff741";

const chains = JSON.stringify([
  {
    name: "base",
    kind: "evm",
    network: NETWORK,
    nativeToken: { symbol: "ETH", decimals: 18, usdPrice: "3000" },
    tokens: [{ symbol: "USDC", address: USDC, decimals: 6, usdPrice: "1" }],
    testnet: true,
  },
]);
const wallet = JSON.stringify({
  id: WALLET,
  name: "bench",
  chains: ["base"],
  evm: { address: "0x658C121CA41e43ADe7164264e5305660f69c17b0" },
  metadata: {},
  status: "active",
  createdAt: new Date().toISOString(),
});
const policy = JSON.stringify({
  walletId: WALLET,
  maxPerTx: "100",
  dailyLimit: null,
  whitelist: [],
  alertAbove: null,
  status: "active",
  updatedAt: new Date().toISOString(),
});
let sent = 0;

/** The stub service: canned answers, the send echoed back as a pending transaction. */
function startStub(): Promise<{ url: string; close(): void }> {
  const server = http.createServer((request, response) => {
    let body = "";
    request.on("data", (chunk) => {
      body += chunk;
    });
    request.on("end", () => {
      const url = request.url ?? "";
      let answer: string;
      let status = 200;
      if (url === "/v1/chains") answer = chains;
      else if (url === `/v1/wallets/${WALLET}`) answer = wallet;
      else if (url === `/v1/wallets/${WALLET}/policy`) answer = policy;
      else if (url === `/v1/wallets/${WALLET}/send`) {
        const input = JSON.parse(body);
        status = 201;
        answer = JSON.stringify({
          id: `tx_bench${sent++}`,
          walletId: WALLET,
          type: "send",
          amount: input.amount,
          token: input.token,
          chain: input.chain,
          to: input.to,
          from: "0x658C121CA41e43ADe7164264e5305660f69c17b0",
          txHash: `0x${"ab".repeat(32)}`,
          timestamp: new Date().toISOString(),
          status: "pending",
          ...(input.spendAuthorization ? { spendDecisionId: input.spendAuthorization.decisionId } : {}),
        });
      } else {
        status = 404;
        answer = JSON.stringify({ error: { code: "NotFound", message: "no", requestId: "req_x" } });
      }
      response.writeHead(status, { "content-type": "application/json" });
      response.end(answer);
    });
  });
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      resolve({ url: `http://127.0.0.1:${port}`, close: () => server.close() });
    }),
  );
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}

async function main(): Promise<void> {
  const stub = await startStub();
  // The daemon's per-identity rate limit would throttle a benchmark that sends as fast as it can.
  const daemon = await startTestDaemon({ AUTHZD_SPEND_RATE_LIMIT_PER_SECOND: "0" });
  try {
    const token = await daemon.identity("bench", ["wallet.spend.authorize", "wallet.spend.settle"], {
      budgetCredits: 1_000_000_000,
    });
    const baseUrl = `${stub.url}/v1`;
    const off = await new SvcWallet({ apiKey: "svc_bench", baseUrl }).wallet.get(WALLET);
    const on = await new SvcWallet({
      apiKey: "svc_bench",
      baseUrl,
      authz: { gatewayUrl: daemon.url, token },
    }).wallet.get(WALLET);
    const direct = new SpendAuthzClient({ gatewayUrl: daemon.url, token });
    const input = { to: TO, amount: "0.01", token: "USDC", chain: "base" };
    const modes: Record<string, () => Promise<unknown>> = {
      raw: async () => {
        const response = await fetch(`${baseUrl}/wallets/${WALLET}/send`, {
          method: "POST",
          headers: { authorization: "Bearer svc_bench", "content-type": "application/json" },
          body: JSON.stringify(input),
        });
        await response.text();
      },
      "gate off": () => off.send(input),
      "gate on": () => on.send(input),
      daemon: async () => {
        const facts = { provider: "svc", network: NETWORK, asset: USDC, amount: "10000", credits: 1 };
        const verdict = await direct.authorize({ ...facts, per_call_cap: "100000000", destination: TO });
        await direct.settle({ ...facts, decision_id: verdict.decisionId, tx_sig: "0xab" });
      },
    };
    const samples: Record<string, number[]> = Object.fromEntries(
      Object.keys(modes).map((name) => [name, []]),
    );
    for (const run of Object.values(modes)) for (let i = 0; i < 50; i++) await run(); // warm up
    for (let round = 0; round < ROUNDS; round++) {
      for (const [name, run] of Object.entries(modes)) {
        for (let i = 0; i < PER_ROUND; i++) {
          const start = performance.now();
          await run();
          samples[name]?.push(performance.now() - start);
        }
      }
    }
    const stats = Object.fromEntries(
      Object.entries(samples).map(([name, values]) => {
        const sorted = [...values].sort((a, b) => a - b);
        return [name, { p50: percentile(sorted, 50), p99: percentile(sorted, 99), n: sorted.length }];
      }),
    ) as Record<string, { p50: number; p99: number; n: number }>;
    console.log(
      `sdk bench: ${ROUNDS} rounds × ${PER_ROUND} sends per mode, load average ${os.loadavg()[0]?.toFixed(2)}, ${os.cpus().length} cores`,
    );
    for (const [name, s] of Object.entries(stats)) {
      console.log(`  ${name.padEnd(9)} p50 ${s.p50.toFixed(3)} ms   p99 ${s.p99.toFixed(3)} ms   (n=${s.n})`);
    }
    const gateOn = stats["gate on"] as { p50: number };
    const gateOff = stats["gate off"] as { p50: number };
    const raw = stats.raw as { p50: number };
    const twoTrips = stats.daemon as { p50: number };
    console.log(
      `  SDK overhead without the gate (p50 gate off − raw): ${(gateOff.p50 - raw.p50).toFixed(3)} ms`,
    );
    console.log(
      `  the gate adds (p50 gate on − gate off): ${(gateOn.p50 - gateOff.p50).toFixed(3)} ms; its two daemon round trips alone: ${twoTrips.p50.toFixed(3)} ms`,
    );
    console.log(`  ratio gate on / gate off (p50): ${(gateOn.p50 / gateOff.p50).toFixed(2)}×`);
  } finally {
    await daemon.stop({ removeHome: true });
    stub.close();
  }
}

await main();
