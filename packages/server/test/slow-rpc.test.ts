import { fundEvm } from "@svc/devnet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { evmKey } from "./support/chains.ts";
import { eventually } from "./support/eventually.ts";
import { RpcGate } from "./support/rpc-gate.ts";
import { waitForSettled } from "./support/spends.ts";
import {
  createTestServer,
  evmThroughGate,
  seedAccount,
  sharedDevnet,
  type TestServer,
} from "./support/test-server.ts";

/**
 * One wallet's chain traffic stalls: the service reaches its EVM node through an RpcGate that holds every
 * request about that wallet (its address, or its sends' recipient) until the test lets it go. While more
 * sends of that wallet than the database pool has connections wait on the chain, another wallet's sends on
 * the same chain and authenticated reads (the stalled wallet's own included) still answer: no database
 * connection or lock is held while a request waits on the chain.
 */

/** The PostgreSQL pool's size (store.ts); PGlite has a single connection. */
const POOL_SIZE = 10;
const SLOW_SENDS = POOL_SIZE + 2;

let server: TestServer;
let gate: RpcGate;
let apiKey: string;

beforeAll(async () => {
  const devnet = await sharedDevnet();
  gate = await RpcGate.start(devnet.evm.rpcUrl);
  server = await createTestServer({ env: await evmThroughGate(gate) });
  ({ apiKey } = await seedAccount(server.api));
});
afterAll(async () => {
  await gate?.close();
  await server?.close();
});

async function fundedWallet(name: string): Promise<{ id: string; address: `0x${string}` }> {
  const wallet = await server.api.post("/v1/wallets", { name, chains: ["base"] }, apiKey);
  if (wallet.status !== 201) throw new Error(wallet.text);
  await fundEvm(await sharedDevnet(), wallet.body.evm.address, { eth: 10n ** 18n, usdc: 100_000_000n });
  return { id: wallet.body.id, address: wallet.body.evm.address };
}

/** True when a JSON-RPC body is about `address`: as a parameter, inside call data, or in a raw transaction. */
const mentions = (body: string, address: string) =>
  body.toLowerCase().includes(address.slice(2).toLowerCase());

describe("a chain that stalls for one wallet", () => {
  it("keeps other sends and authenticated reads answering while more sends than the pool has connections wait on it", async () => {
    const slow = await fundedWallet("stalled");
    const fast = await fundedWallet("unaffected");
    const slowRecipient = evmKey().address;
    const fastRecipient = evmKey().address;
    gate.decide = ({ body }) =>
      mentions(body, slow.address) || mentions(body, slowRecipient) ? "hold" : "forward";

    let slowAnswered = 0;
    let slowRefused = 0;
    const slowSends = Array.from({ length: SLOW_SENDS }, () =>
      server.api
        .post(`/v1/wallets/${slow.id}/send`, { to: slowRecipient, amount: "0.01", chain: "base" }, apiKey)
        .then((response) => {
          slowAnswered++;
          if (response.status !== 201) slowRefused++;
          return response;
        }),
    );

    /** Another wallet's send on the same chain, and authenticated reads (each one an API key lookup). */
    const fastRound = async (round: number) => {
      const [send, fastRead, slowRead, keys] = await Promise.all([
        server.api.post(
          `/v1/wallets/${fast.id}/send`,
          { to: fastRecipient, amount: `0.0${round + 1}`, chain: "base" },
          apiKey,
        ),
        server.api.get(`/v1/wallets/${fast.id}`, apiKey),
        server.api.get(`/v1/wallets/${slow.id}`, apiKey),
        server.api.get("/v1/api-keys", apiKey),
      ]);
      expect(send.status, send.text).toBe(201);
      expect(fastRead.status).toBe(200);
      expect(slowRead.status).toBe(200);
      expect(keys.status).toBe(200);
    };

    // Each step: wait until the held requests settle into a steady set (the slow sends wait on the chain,
    // wherever in the pipeline that is), run the fast round while they are held, then let them go; until
    // every slow send has answered. The fast round must answer while the service is still waiting for every
    // held request: had a lock or a pooled connection been kept across a chain call, the round could only
    // finish once some held request had been given up (the chain layer's time limit).
    let rounds = 0;
    for (;;) {
      let seen = -1;
      let steadySince = Date.now();
      const state = await eventually(
        () => {
          if (slowAnswered === SLOW_SENDS) return "done";
          if (gate.held.length !== seen) {
            seen = gate.held.length;
            steadySince = Date.now();
            return undefined;
          }
          return seen > 0 && Date.now() - steadySince >= 300 ? "held" : undefined;
        },
        { describe: "the stalled wallet's requests to settle at the gate" },
      );
      if (state === "done") break;
      const held = [...gate.held];
      await fastRound(rounds++);
      const givenUp = held.filter((call) => call.abandoned).map((call) => call.methods.join(","));
      expect(givenUp, `round ${rounds}: held requests given up before it answered`).toEqual([]);
      expect(slowRefused).toBe(0);
      gate.openUp();
      gate.decide = ({ body }) =>
        mentions(body, slow.address) || mentions(body, slowRecipient) ? "hold" : "forward";
    }
    expect(rounds).toBeGreaterThan(0);

    // The stalled wallet's sends were all admitted and land, each with its own nonce.
    gate.openUp();
    const responses = await Promise.all(slowSends);
    for (const response of responses) {
      expect(response.status, response.text).toBe(201);
      expect((await waitForSettled(server.api, apiKey, response.body.id)).status).toBe("confirmed");
    }
    const history = await server.api.get(`/v1/wallets/${slow.id}/transactions?type=send&limit=100`, apiKey);
    expect(history.body.data).toHaveLength(SLOW_SENDS);
  }, 600_000);
});
