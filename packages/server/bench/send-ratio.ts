/**
 * The service's overhead on a send, as a ratio measured side by side in one run: USDC transfers admitted
 * through the service (HTTP on a real socket, 201 after the broadcast) per second, against the same USDC
 * transfers signed locally and handed straight to the same local EVM node per second, with the same number
 * of concurrent senders, each on its own wallet (service) or account (raw). The service runs in a process of
 * its own, as deployed; this process is the client of both. Prints figures; asserts nothing.
 */
import { randomBytes } from "node:crypto";
import { connect, createServer, type Socket } from "node:net";
import { fundEvm, startDevnet } from "@svc/devnet";
import {
  createPublicClient,
  encodeFunctionData,
  erc20Abi,
  type Hex,
  http,
  keccak256,
  type PublicClient,
} from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import type { StoreLocation } from "../src/internal/db/store.ts";
import { ApiClient, seedAccount } from "../test/support/api-client.ts";
import { CpuMeter } from "./cpu.ts";
import { forkBenchService, SERVICE_PROCESS_NAME, type ServiceProcess } from "./service-process.ts";

const USDC = 1_000_000n;
const SENDERS = Number(process.env.BENCH_SENDERS ?? 8);
const SENDS_PER_SENDER = Number(process.env.BENCH_SENDS_PER_SENDER ?? 40);
/** Raw transfers are several times faster: more of them keep the two phases of a round about as long. */
const RAW_SENDS_PER_SENDER = 4 * SENDS_PER_SENDER;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);

/**
 * Counts the JSON-RPC calls and the HTTP requests that pass, as a plain TCP pipe in front of the node (no
 * HTTP parsing, so the hop costs both sides next to nothing): each call carries one `"jsonrpc"` member (a
 * batch several), each request starts with `POST `.
 */
async function countingPipe(upstream: string) {
  const target = new URL(upstream);
  const sockets = new Set<Socket>();
  let calls = 0;
  let requests = 0;
  const server = createServer((client) => {
    const node = connect(Number(target.port), target.hostname);
    sockets.add(client).add(node);
    client.on("data", (chunk: Buffer) => {
      for (let at = chunk.indexOf(JSONRPC); at !== -1; at = chunk.indexOf(JSONRPC, at + 1)) calls++;
      for (let at = chunk.indexOf(POST); at !== -1; at = chunk.indexOf(POST, at + 1)) requests++;
      node.write(chunk);
    });
    node.pipe(client);
    for (const [a, b] of [
      [client, node],
      [node, client],
    ] as const) {
      a.on("close", () => b.destroy());
      a.on("error", () => b.destroy());
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    get calls() {
      return calls;
    },
    get requests() {
      return requests;
    },
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
const JSONRPC = Buffer.from('"jsonrpc"');
const POST = Buffer.from("POST ");

/**
 * Waits until the service has finished what the last phase left it: every spend settled and the chain's
 * blocks scanned for incoming transfers up to the head. Each phase then pays for its own work only: without
 * this, the service's scan of the 1,000-odd blocks the raw phase made (the local node mines one block per
 * transaction) ran inside the timed service phase, and the settling of the service's last sends inside the
 * raw phase.
 */
async function drained(service: ServiceProcess, client: PublicClient): Promise<void> {
  const deadline = Date.now() + 120_000;
  for (;;) {
    const head = await client.getBlockNumber({ cacheTime: 0 });
    const backlog = await service.backlog("base");
    if (backlog.pending === 0 && backlog.scannedTo >= head) return;
    if (Date.now() > deadline)
      throw new Error(
        `the service did not settle: ${backlog.pending} spends pending, scanned to ${backlog.scannedTo} at head ${head}`,
      );
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** `senders` loops of `each` sends, all at once; returns sends per second. */
async function rate(senders: number, each: number, send: (sender: number) => Promise<void>): Promise<number> {
  const start = performance.now();
  await Promise.all(
    Array.from({ length: senders }, async (_, sender) => {
      for (let i = 0; i < each; i++) await send(sender);
    }),
  );
  return (senders * each) / ((performance.now() - start) / 1000);
}

/**
 * Raw: each account signs USDC transfers locally (fixed gas and fees) and sends them to the node. Nonces are
 * counted here from the first round on: the node's pending count can lag behind what it has accepted while
 * it is still mining a backlog, and a nonce read from it again would sign a transaction it already holds.
 */
async function rawRate(
  client: PublicClient,
  usdc: Hex,
  keys: Hex[],
  to: Hex,
  nonces: number[],
): Promise<number> {
  const accounts = keys.map((key) => privateKeyToAccount(key));
  const fees = await client.estimateFeesPerGas({ type: "eip1559", chain: null });
  const chainId = await client.getChainId();
  const data = encodeFunctionData({ abi: erc20Abi, functionName: "transfer", args: [to, USDC / 100n] });
  return rate(accounts.length, RAW_SENDS_PER_SENDER, async (sender) => {
    const account = accounts[sender];
    if (!account) throw new Error("no account");
    const nonce = nonces[sender] ?? 0;
    nonces[sender] = nonce + 1;
    const raw = await account.signTransaction({
      type: "eip1559",
      chainId,
      nonce,
      to: usdc,
      value: 0n,
      data,
      gas: 100_000n,
      maxFeePerGas: fees.maxFeePerGas,
      maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
    });
    const hash = await client.request({ method: "eth_sendRawTransaction", params: [raw] });
    if (hash !== keccak256(raw)) throw new Error("node answered another hash");
  });
}

export async function benchSendRatio(label: string, store: StoreLocation): Promise<void> {
  const devnet = await startDevnet();
  const proxy = await countingPipe(devnet.evm.rpcUrl);
  const service = await forkBenchService(
    store,
    // The service reaches the node through the counting pipe; the raw senders too, so both pay its hop.
    { ...devnet, evm: { ...devnet.evm, rpcUrl: proxy.url } },
  );
  const client = createPublicClient({ transport: http(proxy.url) }) as PublicClient;
  try {
    const api = new ApiClient(service.url);
    const { apiKey } = await seedAccount(api);
    const to = `0x${randomBytes(20).toString("hex")}` as Hex;
    const wallets = await Promise.all(
      Array.from({ length: SENDERS }, async () => {
        const wallet = (await api.post("/v1/wallets", { name: "bench", chains: ["base"] }, apiKey)).body as {
          id: string;
          evm: { address: Hex };
        };
        return wallet;
      }),
    );
    const rawKeys = Array.from({ length: SENDERS }, () => generatePrivateKey());
    // Fresh accounts: every nonce starts at 0.
    const rawNonces = rawKeys.map(() => 0);
    for (const address of [
      ...wallets.map((w) => w.evm.address),
      ...rawKeys.map((k) => privateKeyToAccount(k).address),
    ]) {
      await fundEvm(devnet, address, { eth: 10n ** 19n, usdc: 1_000_000n * USDC });
    }
    const service_ = async () => {
      const before = { calls: proxy.calls, requests: proxy.requests };
      const sends = await rate(SENDERS, SENDS_PER_SENDER, async (sender) => {
        const wallet = wallets[sender];
        if (!wallet) throw new Error("no wallet");
        const response = await api.post(
          `/v1/wallets/${wallet.id}/send`,
          { to, amount: "0.01", token: "USDC", chain: "base" },
          apiKey,
        );
        if (response.status !== 201) throw new Error(`send refused: ${response.text}`);
      });
      const count = SENDERS * SENDS_PER_SENDER;
      return {
        sends,
        callsPerSend: (proxy.calls - before.calls) / count,
        requestsPerSend: (proxy.requests - before.requests) / count,
      };
    };
    // Alternated, so a drift of the machine's load weighs on both sides alike. The first round warms both
    // sides up (V8 compiles hot code as it runs it) and is not counted: the service's first sends ran at
    // about half its later rate.
    const raws: number[] = [];
    const services: { sends: number; callsPerSend: number; requestsPerSend: number }[] = [];
    // Where the time goes: the CPU each side costs, this process (the service's load, or the raw senders),
    // the service's process, the node and, on PostgreSQL, the database server.
    const groups: Record<string, string> = {
      service: SERVICE_PROCESS_NAME,
      node: "anvil",
      ...("databaseUrl" in store ? { PostgreSQL: "postgres" } : {}),
    };
    const rawCpu = new CpuMeter(groups);
    const serviceCpu = new CpuMeter(groups);
    for (let round = 0; round <= ROUNDS; round++) {
      const counted = <T>(meter: CpuMeter, work: () => Promise<T>) =>
        round === 0 ? work() : meter.measure(work);
      await drained(service, client);
      const rawSends = await counted(rawCpu, () => rawRate(client, devnet.evm.usdc, rawKeys, to, rawNonces));
      await drained(service, client);
      const serviceSends = await counted(serviceCpu, service_);
      if (round === 0) continue;
      raws.push(rawSends);
      services.push(serviceSends);
    }
    const raw = raws.reduce((a, b) => a + b, 0) / raws.length;
    const mean = (pick: (s: (typeof services)[number]) => number) =>
      services.reduce((a, b) => a + pick(b), 0) / services.length;
    const through = mean((s) => s.sends);
    // Each round's own ratio, its two phases run back to back: how far one round's reading can stray.
    const roundRatios = services.map((s, i) => (s.sends / (raws[i] ?? Number.NaN)).toFixed(2)).join(", ");
    console.log(
      `[${label}] USDC sends, ${SENDERS} concurrent senders each on its own wallet/account: service ${through.toFixed(1)} admitted sends/s, raw ${raw.toFixed(1)} signed transfers/s, ratio ${(through / raw).toFixed(2)} (rounds ${roundRatios}; per send: ${mean((s) => s.callsPerSend).toFixed(1)} JSON-RPC calls in ${mean((s) => s.requestsPerSend).toFixed(1)} requests to the node)`,
    );
    const perSend = serviceCpu.perUnit(ROUNDS * SENDERS * SENDS_PER_SENDER);
    const perTransfer = rawCpu.perUnit(ROUNDS * SENDERS * RAW_SENDS_PER_SENDER);
    if (perSend && perTransfer) {
      const parts = (cpu: NonNullable<typeof perSend>, self: string) =>
        `${cpu.machine.toFixed(2)} ms of the machine's CPU (${[
          `${self} ${cpu.self.toFixed(2)}`,
          ...Object.entries(cpu.groups).map(([name, ms]) => `${name} ${ms.toFixed(2)}`),
        ].join(", ")}; the machine ${(cpu.busyShare * 100).toFixed(0)}% busy)`;
      console.log(
        `[${label}] CPU per admitted send: ${parts(perSend, "its load")}; per raw transfer: ${parts(perTransfer, "raw senders")}`,
      );
    }
  } finally {
    await service.close();
    await proxy.close();
    await devnet.stop();
  }
}
