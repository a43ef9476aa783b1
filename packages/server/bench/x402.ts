/**
 * x402 benchmark on the local chains: what paying adds to a fetch through the service. One resource server
 * from the reference packages (`@x402/express`) serves the same JSON at a paid route (0.01 USDC, v2) and at a
 * free twin; the reference facilitator settles on the devnet. Between the resource server and the
 * facilitator sits a timing relay, so each paid fetch's own verify + settle time is known and subtracted.
 * Modes run interleaved in rounds so machine noise hits them alike. Prints figures; asserts nothing.
 *   unpaid   POST /v1/x402/fetch of the free route (the service fetches once)
 *   paid     POST /v1/x402/fetch of the paid route (402, policy + record + sign, paid retry, completion)
 * and paid fetches/s with 8 concurrent clients.
 */
import { randomBytes } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import { fundEvm, startDevnet } from "@svc/devnet";
import { evmNetwork, startLocalFacilitator, startResourceServerV2 } from "@svc/x402-local";
import { privateKeyToAddress } from "viem/accounts";
import type { StoreLocation } from "../src/internal/db/store.ts";
import { ApiClient, seedAccount } from "../test/support/api-client.ts";
import { startBenchService } from "./service.ts";

const ROUNDS = Number(process.env.BENCH_X402_ROUNDS ?? 6);
const PER_ROUND = Number(process.env.BENCH_X402_PER_ROUND ?? 15);
const CONCURRENT_CLIENTS = 8;
const CONCURRENT_TOTAL = Number(process.env.BENCH_X402_CONCURRENT_TOTAL ?? 96);
const USDC = 1_000_000n;
const BODY = { city: "Lisbon", forecast: "sunny", celsius: 21 };

function percentile(values: readonly number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
}

const ms = (value: number) => `${value.toFixed(1)} ms`;

/**
 * Forwards every request to the facilitator and adds the time of each `/verify` and `/settle` answer to
 * `spent` (the relay hop included: it is time the resource server waits for the facilitator).
 */
async function startTimingRelay(target: string) {
  const spent = { verify: 0, settle: 0 };
  const settles: number[] = [];
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", async () => {
      const start = performance.now();
      const body = chunks.length === 0 ? undefined : Buffer.concat(chunks);
      const answer = await fetch(`${target}${request.url}`, {
        method: request.method ?? "GET",
        headers: { "content-type": request.headers["content-type"] ?? "application/json" },
        ...(body && request.method !== "GET" ? { body } : {}),
      });
      const text = await answer.text();
      const elapsed = performance.now() - start;
      if (request.url?.startsWith("/verify")) spent.verify += elapsed;
      if (request.url?.startsWith("/settle")) {
        spent.settle += elapsed;
        settles.push(elapsed);
      }
      response.writeHead(answer.status, { "content-type": answer.headers.get("content-type") ?? "" });
      response.end(text);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spent,
    settles,
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

export async function benchX402(label: string, store: StoreLocation): Promise<void> {
  const devnet = await startDevnet();
  const facilitator = await startLocalFacilitator(devnet);
  const relay = await startTimingRelay(facilitator.url);
  const payTo = privateKeyToAddress(`0x${randomBytes(32).toString("hex")}`);
  const resources = await startResourceServerV2(
    relay.url,
    [
      {
        path: "/weather",
        accepts: [
          {
            network: evmNetwork(devnet.evm.chainId),
            payTo,
            amount: "10000",
            asset: devnet.evm.usdc,
            extra: devnet.evm.usdcEip712,
          },
        ],
        body: BODY,
      },
    ],
    { free: { "/weather-free": BODY } },
  );
  const service = await startBenchService(store, devnet);
  try {
    const api = new ApiClient(service.url);
    const { apiKey } = await seedAccount(api);
    const created = await api.post("/v1/wallets", { name: "x402 bench", chains: ["base"] }, apiKey);
    const wallet = created.body as { id: string; evm: { address: `0x${string}` } };
    await fundEvm(devnet, wallet.evm.address, { usdc: 10_000n * USDC });

    const fetchThroughService = async (path: string, paid: boolean): Promise<void> => {
      const response = await api.post(
        "/v1/x402/fetch",
        { walletId: wallet.id, url: `${resources.url}${path}` },
        apiKey,
      );
      if (response.status !== 200 || response.body.status !== 200) {
        throw new Error(`fetch of ${path} failed: ${response.text.slice(0, 500)}`);
      }
      if (paid !== (response.body.transaction?.status === "confirmed")) {
        throw new Error(`fetch of ${path}: unexpected payment state ${response.text.slice(0, 500)}`);
      }
    };
    // Warm up: the resource server syncs with the facilitator on its first request; JIT, connections.
    for (let i = 0; i < 5; i++) {
      await fetchThroughService("/weather-free", false);
      await fetchThroughService("/weather", true);
    }

    const unpaid: number[] = [];
    const paid: number[] = [];
    const facilitatorTime: number[] = [];
    const settleTime: number[] = [];
    const paidBeyondFacilitator: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      for (let i = 0; i < PER_ROUND; i++) {
        const start = performance.now();
        await fetchThroughService("/weather-free", false);
        unpaid.push(performance.now() - start);
      }
      for (let i = 0; i < PER_ROUND; i++) {
        relay.spent.verify = 0;
        relay.spent.settle = 0;
        const start = performance.now();
        await fetchThroughService("/weather", true);
        const elapsed = performance.now() - start;
        const facilitatorMs = relay.spent.verify + relay.spent.settle;
        paid.push(elapsed);
        facilitatorTime.push(facilitatorMs);
        settleTime.push(relay.spent.settle);
        paidBeyondFacilitator.push(elapsed - facilitatorMs);
      }
    }

    const settlesBefore = relay.settles.length;
    let issued = 0;
    const concurrentStart = performance.now();
    await Promise.all(
      Array.from({ length: CONCURRENT_CLIENTS }, async () => {
        while (issued < CONCURRENT_TOTAL) {
          issued++;
          await fetchThroughService("/weather", true);
        }
      }),
    );
    const concurrentSeconds = (performance.now() - concurrentStart) / 1000;
    const concurrentSettles = relay.settles.slice(settlesBefore);

    const p = (values: number[]) => ({ p50: percentile(values, 0.5), p99: percentile(values, 0.99) });
    const u = p(unpaid);
    const pd = p(paid);
    const fac = p(facilitatorTime);
    const settle = p(settleTime);
    const beyond = p(paidBeyondFacilitator);
    console.log(
      `[${label}] x402 fetch through the service, local EVM chain: ${ROUNDS} rounds × ${PER_ROUND} fetches per mode, load average ${os.loadavg()[0]?.toFixed(2)}, ${os.cpus().length} cores`,
    );
    console.log(`[${label}]   unpaid fetch (free twin)            p50 ${ms(u.p50)}   p99 ${ms(u.p99)}`);
    console.log(`[${label}]   paid fetch (0.01 USDC, v2)          p50 ${ms(pd.p50)}   p99 ${ms(pd.p99)}`);
    console.log(
      `[${label}]   facilitator verify + settle         p50 ${ms(fac.p50)}   p99 ${ms(fac.p99)}   (settle alone p50 ${ms(settle.p50)}, p99 ${ms(settle.p99)})`,
    );
    console.log(
      `[${label}]   paying adds (paid − unpaid)         p50 ${ms(pd.p50 - u.p50)}   p99 ${ms(pd.p99 - u.p99)}`,
    );
    console.log(
      `[${label}]   paid − its own verify + settle      p50 ${ms(beyond.p50)}   p99 ${ms(beyond.p99)}   (per fetch)`,
    );
    console.log(
      `[${label}]   beyond the facilitator's own time   p50 ${ms(beyond.p50 - u.p50)}   p99 ${ms(beyond.p99 - u.p99)}   (the line above − unpaid; goal < 20 ms p50)`,
    );
    console.log(
      `[${label}]   ${CONCURRENT_CLIENTS} concurrent clients: ${(CONCURRENT_TOTAL / concurrentSeconds).toFixed(1)} paid fetches/s (${CONCURRENT_TOTAL} in ${concurrentSeconds.toFixed(1)} s; the local facilitator settles one at a time: its settle answers took p50 ${ms(percentile(concurrentSettles, 0.5))}, queueing included)`,
    );
  } finally {
    await service.close();
    await resources.stop();
    await relay.close();
    await facilitator.stop();
    await devnet.stop();
  }
}
