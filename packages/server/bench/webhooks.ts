/**
 * Webhooks, measured on a real service, real local chains and a real HTTP receiver on loopback:
 * - delivery latency, from a change's answer (its transaction committed before it) to the receiver, and
 *   from the event's `createdAt` (the start of its transaction) to the receiver: policy changes one after
 *   another, and the `transaction.created` events of sends under load;
 * - USDC sends per second with no endpoint registered against the same with one endpoint receiving every
 *   event, alternated in one run, and their ratio (the outbox and the delivery worker on the send path).
 * Prints figures; asserts nothing.
 */
import { randomBytes } from "node:crypto";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { fundEvm, startDevnet } from "@svc/devnet";
import type { Hex } from "viem";
import type { StoreLocation } from "../src/internal/db/store.ts";
import { ApiClient, seedAccount } from "../test/support/api-client.ts";
import { startBenchService } from "./service.ts";

const USDC = 1_000_000n;
const SENDERS = Number(process.env.BENCH_SENDERS ?? 8);
const SENDS_PER_SENDER = Number(process.env.BENCH_SENDS_PER_SENDER ?? 30);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const POLICY_CHANGES = Number(process.env.BENCH_WEBHOOK_CHANGES ?? 200);

/** A receiver that answers 200 at once and notes when each event arrived. */
async function startReceiver() {
  const arrivals = new Map<
    string,
    { at: number; type: string; timestamp: string; data: Record<string, unknown> }
  >();
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      const at = Date.now();
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      arrivals.set(String(request.headers["webhook-id"]), {
        at,
        type: body.type,
        timestamp: body.timestamp,
        data: body.data,
      });
      response.writeHead(200).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`,
    arrivals,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function percentiles(values: number[]): string {
  const sorted = [...values].sort((a, b) => a - b);
  const p = (q: number) => (sorted[Math.floor(q * (sorted.length - 1))] ?? Number.NaN).toFixed(0);
  return `p50 ${p(0.5)} ms, p99 ${p(0.99)} ms (n=${sorted.length})`;
}

async function until(what: string, check: () => boolean, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`still waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

export async function benchWebhooks(label: string, store: StoreLocation): Promise<void> {
  const devnet = await startDevnet();
  const service = await startBenchService(store, devnet);
  const receiver = await startReceiver();
  try {
    const api = new ApiClient(service.url);
    const { apiKey } = await seedAccount(api, "webhooks");
    const wallets = await Promise.all(
      Array.from({ length: SENDERS }, async () => {
        const created = await api.post("/v1/wallets", { name: "bench", chains: ["base"] }, apiKey);
        return created.body as { id: string; evm: { address: Hex } };
      }),
    );
    for (const wallet of wallets)
      await fundEvm(devnet, wallet.evm.address, { eth: 10n ** 19n, usdc: 1_000_000n * USDC });
    const to = `0x${randomBytes(20).toString("hex")}` as Hex;

    // Latency, one change at a time: the answer of each PATCH to its delivery.
    const endpoint = await api.post("/v1/webhook-endpoints", { url: receiver.url }, apiKey);
    if (endpoint.status !== 201) throw new Error(`endpoint: ${endpoint.text}`);
    const answered = new Map<string, number>();
    const policyWallet = wallets[0]?.id ?? "";
    for (let i = 0; i < POLICY_CHANGES; i++) {
      const maxPerTx = String(1000 + i);
      const response = await api.request("PATCH", `/v1/wallets/${policyWallet}/policy`, {
        token: apiKey,
        body: { maxPerTx },
      });
      if (response.status !== 200) throw new Error(`PATCH: ${response.text}`);
      answered.set(maxPerTx, Date.now());
      await new Promise((resolve) => setTimeout(resolve, 10 + Math.random() * 40));
    }
    const policyArrivals = () =>
      [...receiver.arrivals.values()].filter(
        (a) => a.type === "policy.updated" && answered.has(String(a.data.maxPerTx)),
      );
    await until("every policy change delivered", () => policyArrivals().length >= POLICY_CHANGES);
    const fromAnswer = policyArrivals().map((a) => a.at - (answered.get(String(a.data.maxPerTx)) ?? 0));
    const fromCreated = policyArrivals().map((a) => a.at - Date.parse(a.timestamp));
    console.log(
      `[${label}] webhook latency, ${POLICY_CHANGES} policy changes one at a time: from the change's answer ${percentiles(fromAnswer)}; from its transaction's start ${percentiles(fromCreated)}`,
    );
    await api.delete(`/v1/webhook-endpoints/${endpoint.body.id}`, apiKey);

    // Sends per second without and with an endpoint, alternated.
    const sendAnswered = new Map<string, number>();
    const sendRate = async (): Promise<number> => {
      const start = performance.now();
      await Promise.all(
        wallets.map(async (wallet) => {
          for (let i = 0; i < SENDS_PER_SENDER; i++) {
            const response = await api.post(
              `/v1/wallets/${wallet.id}/send`,
              { to, amount: "0.01", token: "USDC", chain: "base" },
              apiKey,
            );
            if (response.status !== 201) throw new Error(`send refused: ${response.text}`);
            sendAnswered.set(response.body.id, Date.now());
          }
        }),
      );
      return (SENDERS * SENDS_PER_SENDER) / ((performance.now() - start) / 1000);
    };
    const without: number[] = [];
    const withEndpoint: number[] = [];
    const underLoad: number[] = [];
    const deliveryRates: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      without.push(await sendRate());
      const registered = await api.post("/v1/webhook-endpoints", { url: receiver.url }, apiKey);
      sendAnswered.clear();
      const roundStart = Date.now();
      const arrivedBefore = receiver.arrivals.size;
      withEndpoint.push(await sendRate());
      const created = () =>
        new Set(
          [...receiver.arrivals.values()]
            .filter((a) => a.type === "transaction.created")
            .map((a) => String(a.data.id)),
        );
      await until("the round's transaction.created deliveries", () => {
        const delivered = created();
        return [...sendAnswered.keys()].every((id) => delivered.has(id));
      });
      const lastArrival = Math.max(...[...receiver.arrivals.values()].map((a) => a.at));
      deliveryRates.push((receiver.arrivals.size - arrivedBefore) / ((lastArrival - roundStart) / 1000));
      for (const arrival of receiver.arrivals.values()) {
        const answer =
          arrival.type === "transaction.created" ? sendAnswered.get(String(arrival.data.id)) : undefined;
        if (answer !== undefined) underLoad.push(arrival.at - answer);
      }
      await api.delete(`/v1/webhook-endpoints/${registered.body.id}`, apiKey);
    }
    const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;
    console.log(
      `[${label}] USDC sends, ${SENDERS} concurrent senders, ${ROUNDS} alternated rounds: without an endpoint ${mean(without).toFixed(1)} sends/s, with one receiving every event ${mean(withEndpoint).toFixed(1)} sends/s, ratio ${(mean(withEndpoint) / mean(without)).toFixed(2)}; transaction.created latency under that load, from the send's answer: ${percentiles(underLoad)}; the endpoint received ${mean(deliveryRates).toFixed(0)} events/s (one at a time, in order)`,
    );
  } finally {
    await service.close();
    await receiver.close();
    await devnet.stop();
  }
}
