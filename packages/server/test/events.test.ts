import { fundEvm } from "@svc/devnet";
import { sql } from "drizzle-orm";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sweepEvents } from "../src/events/events.ts";
import { selectRows } from "../src/internal/db/store.ts";
import { failSpend } from "../src/spends/admission.ts";
import {
  confirmTransactions,
  recordTransaction,
  type TransactionRow,
} from "../src/transactions/transactions.ts";
import { RETRY_DELAYS_MS } from "../src/webhooks/delivery.ts";
import { eventually } from "./support/eventually.ts";
import { waitForHistory, waitForSettled } from "./support/spends.ts";
import {
  type ApiClient,
  createFreshDatabase,
  createTestServer,
  expectErrorShape,
  seedAccount,
  sharedDevnet,
  type TestServer,
} from "./support/test-server.ts";

const USDC = 1_000_000n;

let server: TestServer;

beforeAll(async () => {
  await sharedDevnet();
  server = await createTestServer();
});
afterAll(() => server.close());

interface EventView {
  id: string;
  type: string;
  createdAt: string;
  data: Record<string, any>;
}

/** Every event the credential sees, following nextCursor page by page. */
async function allEvents(token: string, query = "", pageSize = 100): Promise<EventView[]> {
  const seen: EventView[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < 1000; page++) {
    const after = cursor === undefined ? "" : `&after=${cursor}`;
    const response = await server.api.get(`/v1/events?limit=${pageSize}${query}${after}`, token);
    expect(response.status, response.text).toBe(200);
    expect(typeof response.body.nextCursor).toBe("string");
    seen.push(...response.body.data);
    if (response.body.data.length === 0) {
      // An empty page keeps the cursor: polling from it later gets what comes next.
      if (cursor !== undefined) expect(response.body.nextCursor).toBe(cursor);
      return seen;
    }
    cursor = response.body.nextCursor;
  }
  throw new Error("more than 1000 pages of events");
}

const ofType = (events: EventView[], type: string) => events.filter((event) => event.type === type);

async function fundedWallet(apiKey: string, policy?: Record<string, unknown>) {
  const created = await server.api.post(
    "/v1/wallets",
    { name: "events", chains: ["base"], ...(policy ? { policy } : {}) },
    apiKey,
  );
  expect(created.status, created.text).toBe(201);
  await fundEvm(await sharedDevnet(), created.body.evm.address, { eth: 10n ** 18n, usdc: 50n * USDC });
  return created.body as { id: string; evm: { address: string } };
}

describe("events", () => {
  it("are written once by each change that causes them, and never by a refused change", async () => {
    const owner = await seedAccount(server.api);
    // The seed's own key is the first event.
    const start = await eventually(async () => {
      const seen = await allEvents(owner.apiKey);
      return seen.length > 0 && seen;
    });
    expect(start.map((e) => e.type)).toEqual(["api_key.created"]);
    expect(start[0]?.data).toMatchObject({ id: owner.apiKeyId, role: "admin" });
    expect(JSON.stringify(start)).not.toContain(owner.apiKey);

    const key = await server.api.post("/v1/api-keys", { name: "bot", role: "agent" }, owner.apiKey);
    expect((await server.api.post("/v1/api-keys", { name: "", role: "agent" }, owner.apiKey)).status).toBe(
      400,
    );
    expect((await server.api.delete(`/v1/api-keys/${key.body.id}`, owner.apiKey)).status).toBe(204);
    expect((await server.api.delete(`/v1/api-keys/${key.body.id}`, owner.apiKey)).status).toBe(204);

    const wallet = await fundedWallet(owner.apiKey, { alertAbove: "2", maxPerTx: "10" });
    const patch = (body: unknown, token = owner.apiKey) =>
      server.api.request("PATCH", `/v1/wallets/${wallet.id}/policy`, { token, body });
    expect((await patch({ dailyLimit: "40" })).status).toBe(200);
    const agent = await server.api.post(
      "/v1/api-keys",
      { name: "agent", role: "agent", walletIds: [wallet.id] },
      owner.apiKey,
    );
    expect((await patch({ dailyLimit: "90" }, agent.body.key)).status).toBe(403);

    const recipient = await server.api.post("/v1/wallets", { name: "in", chains: ["base"] }, owner.apiKey);
    const send = (amount: string) =>
      server.api.post(
        `/v1/wallets/${wallet.id}/send`,
        { to: recipient.body.evm.address, amount, chain: "base" },
        owner.apiKey,
      );
    const small = await send("1");
    const large = await send("3");
    expect((await send("11")).status).toBe(403);
    for (const sent of [small, large]) {
      expect(sent.status, sent.text).toBe(201);
      expect((await waitForSettled(server.api, owner.apiKey, sent.body.id)).status).toBe("confirmed");
    }
    await waitForHistory(server.api, owner.apiKey, recipient.body.id, (rows) => rows.length === 2);

    expect((await server.api.delete(`/v1/wallets/${wallet.id}`, owner.apiKey)).status).toBe(204);
    expect((await server.api.delete(`/v1/wallets/${wallet.id}`, owner.apiKey)).status).toBe(204);

    // Events appear once every transaction older than theirs has ended: wait for the last change's.
    const events = await eventually(async () => {
      const seen = await allEvents(owner.apiKey);
      return ofType(seen, "wallet.archived").length > 0 && seen;
    });
    expect(ofType(events, "api_key.created").map((e) => e.data.id)).toEqual([
      owner.apiKeyId,
      key.body.id,
      agent.body.id,
    ]);
    expect(ofType(events, "api_key.revoked").map((e) => e.data.id)).toEqual([key.body.id]);
    expect(ofType(events, "policy.updated").map((e) => e.data.dailyLimit)).toEqual(["40"]);
    expect(ofType(events, "transaction.created").map((e) => e.data.id)).toEqual([
      small.body.id,
      large.body.id,
    ]);
    expect(ofType(events, "transaction.created")[0]?.data).toMatchObject({ status: "pending", amount: "1" });
    expect(
      ofType(events, "transaction.confirmed")
        .map((e) => e.data.id)
        .sort(),
    ).toEqual([small.body.id, large.body.id].sort());
    expect(ofType(events, "transaction.confirmed")[0]?.data.status).toBe("confirmed");
    // The funding of the sender was received too; the recipient received exactly the two sends.
    const received = ofType(events, "transaction.received").filter(
      (e) => e.data.walletId === recipient.body.id,
    );
    expect(received.map((e) => e.data.txHash).sort()).toEqual([small.body.txHash, large.body.txHash].sort());
    expect(received.every((e) => e.data.type === "receive" && e.data.status === "confirmed")).toBe(true);
    const alerts = ofType(events, "spend.alert");
    expect(alerts).toHaveLength(1);
    expect(alerts[0]?.data).toMatchObject({
      alertAbove: "2.00",
      usdValue: "3.00",
      transaction: { id: large.body.id },
    });
    expect(ofType(events, "wallet.archived").map((e) => e.data.id)).toEqual([wallet.id]);
    expect(ofType(events, "wallet.archived")[0]?.data.status).toBe("archived");
    // Each once, oldest first: the changes this test made one after another appear in that order, their
    // times never going back. (The background workers' events, confirmations and receipts, fall between
    // them where their own database transactions wrote; one that began a moment before a request's but wrote
    // after it shows a createdAt a millisecond or so earlier than the event before it.)
    expect(new Set(events.map((e) => e.id)).size).toBe(events.length);
    const madeInTurn = events.filter(
      (e) => !["transaction.confirmed", "transaction.received"].includes(e.type),
    );
    const subject = (e: EventView) =>
      e.type === "policy.updated" ? e.data.dailyLimit : (e.data.id ?? e.data.transaction?.id);
    expect(madeInTurn.map((e) => [e.type, subject(e)])).toEqual([
      ["api_key.created", owner.apiKeyId],
      ["api_key.created", key.body.id],
      ["api_key.revoked", key.body.id],
      ["policy.updated", "40"],
      ["api_key.created", agent.body.id],
      ["transaction.created", small.body.id],
      ["transaction.created", large.body.id],
      ["spend.alert", large.body.id],
      ["wallet.archived", wallet.id],
    ]);
    const times = madeInTurn.map((e) => Date.parse(e.createdAt));
    expect([...times].sort((a, b) => a - b)).toEqual(times);
  });

  it("of a confirmer pass that finds several spends landed are written together, in order, one per spend still pending", async () => {
    const { apiKey } = await seedAccount(server.api);
    const wallet = await server.api.post("/v1/wallets", { name: "batch", chains: ["base"] }, apiKey);
    expect(wallet.status, wallet.text).toBe(201);
    const db = server.service.store.db;
    // Recorded with a hash but no signed transaction: the running confirmer has nothing to send or ask of them.
    const rows = [];
    for (let i = 1; i <= 3; i++) {
      rows.push(
        await recordTransaction(db, {
          walletId: wallet.body.id,
          type: "send",
          chain: "base",
          token: "USDC",
          amountAtomic: BigInt(i) * USDC,
          decimals: 6,
          fromAddress: wallet.body.evm.address,
          toAddress: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
          txHash: `0x${String(i).repeat(64)}`,
          status: "pending",
          usdMicros: BigInt(i) * USDC,
        }),
      );
    }
    const [first, second, third] = rows as [TransactionRow, TransactionRow, TransactionRow];
    // Another caller settled the second first.
    await failSpend(db, second.id, "test: settled elsewhere");
    const blockTime = new Date("2026-11-23T00:00:00Z");
    // Given newest first: the rows are locked in id order, the events written in the order given.
    const confirmed = await confirmTransactions(
      db,
      [third, second, first].map((row) => ({ transactionId: row.id, confirmedAt: blockTime })),
    );
    expect(confirmed.map((row) => row.id)).toEqual([third.id, first.id]);

    // Events appear once every transaction older than theirs has ended (other test databases' too, on
    // PostgreSQL): wait for the confirmation's.
    const events = await eventually(async () => {
      const confirmations = ofType(await allEvents(apiKey), "transaction.confirmed");
      return confirmations.length > 0 && confirmations;
    });
    expect(events.map((event) => event.data.id)).toEqual([third.id, first.id]);
    expect(events.map((event) => [event.data.status, event.data.confirmedAt])).toEqual([
      ["confirmed", blockTime.toISOString()],
      ["confirmed", blockTime.toISOString()],
    ]);
    const statuses = await Promise.all(
      rows.map(async (row) => (await server.api.get(`/v1/transactions/${row.id}`, apiKey)).body.status),
    );
    expect(statuses).toEqual(["confirmed", "failed", "confirmed"]);
  });

  it("page by cursor without gaps or repeats, and filter by type and wallet", async () => {
    const owner = await seedAccount(server.api);
    const wallets = [];
    for (let i = 0; i < 3; i++) {
      const created = await server.api.post("/v1/wallets", { name: `w${i}`, chains: ["base"] }, owner.apiKey);
      wallets.push(created.body.id as string);
      for (const dailyLimit of ["10", "20"]) {
        await server.api.request("PATCH", `/v1/wallets/${created.body.id}/policy`, {
          token: owner.apiKey,
          body: { dailyLimit },
        });
      }
    }
    const whole = await eventually(async () => {
      const seen = await allEvents(owner.apiKey);
      return seen.length >= 7 && seen;
    });
    expect(whole).toHaveLength(7);
    expect(await allEvents(owner.apiKey, "", 2)).toEqual(whole);
    expect(await allEvents(owner.apiKey, "&type=policy.updated", 4)).toEqual(ofType(whole, "policy.updated"));
    const ofSecond = await allEvents(owner.apiKey, `&walletId=${wallets[1]}`);
    expect(ofSecond.map((e) => e.data.dailyLimit)).toEqual(["10", "20"]);
    const both = await allEvents(owner.apiKey, "&type=api_key.created,policy.updated");
    expect(both).toEqual(whole);

    const bad = await server.api.get("/v1/events?after=not-a-cursor", owner.apiKey);
    expect(bad.status).toBe(400);
    const unknown = await server.api.get("/v1/events?type=transaction.exploded", owner.apiKey);
    expect(unknown.status).toBe(400);
    expect(expectErrorShape(unknown).message).toContain("transaction.exploded");
  });

  it("are seen by an agent or read key only for its wallets, and by no other account", async () => {
    const owner = await seedAccount(server.api);
    const mine = await server.api.post("/v1/wallets", { name: "mine", chains: ["base"] }, owner.apiKey);
    const other = await server.api.post("/v1/wallets", { name: "other", chains: ["base"] }, owner.apiKey);
    for (const wallet of [mine.body.id, other.body.id]) {
      await server.api.request("PATCH", `/v1/wallets/${wallet}/policy`, {
        token: owner.apiKey,
        body: { maxPerTx: "5" },
      });
    }
    for (const role of ["agent", "read"]) {
      const key = await server.api.post(
        "/v1/api-keys",
        { name: role, role, walletIds: [mine.body.id] },
        owner.apiKey,
      );
      const seen = await eventually(async () => {
        const visible = await allEvents(key.body.key);
        return visible.length > 0 && visible;
      });
      expect(seen.map((e) => [e.type, e.data.walletId])).toEqual([["policy.updated", mine.body.id]]);
      const outside = await server.api.get(`/v1/events?walletId=${other.body.id}`, key.body.key);
      expect(outside.status).toBe(404);
    }
    // The owner sees every event; another account, none of them.
    const owned = await eventually(async () => {
      const seen = ofType(await allEvents(owner.accessToken), "policy.updated");
      return seen.length >= 2 && seen;
    });
    expect(owned).toHaveLength(2);
    const stranger = await seedAccount(server.api, "stranger");
    const strangers = await eventually(async () => {
      const seen = await allEvents(stranger.apiKey);
      return seen.length > 0 && seen;
    });
    expect(strangers.map((e) => e.type)).toEqual(["api_key.created"]);
    expect((await server.api.get(`/v1/events?walletId=${mine.body.id}`, stranger.apiKey)).status).toBe(404);
  });

  it("are seen by an agent or read key bound to no wallet for every wallet, but not the account's API keys", async () => {
    const owner = await seedAccount(server.api);
    const wallets = [];
    for (const name of ["one", "two"]) {
      const created = await server.api.post("/v1/wallets", { name, chains: ["base"] }, owner.apiKey);
      await server.api.request("PATCH", `/v1/wallets/${created.body.id}/policy`, {
        token: owner.apiKey,
        body: { maxPerTx: "5" },
      });
      wallets.push(created.body.id);
    }
    for (const role of ["agent", "read"]) {
      const key = await server.api.post("/v1/api-keys", { name: `unbound ${role}`, role }, owner.apiKey);
      const seen = await eventually(async () => {
        const visible = await allEvents(key.body.key);
        return visible.length >= 2 && visible;
      });
      expect(seen.map((e) => [e.type, e.data.walletId])).toEqual(wallets.map((id) => ["policy.updated", id]));
      const keyEvents = await server.api.get("/v1/events?type=api_key.created,api_key.revoked", key.body.key);
      expect(keyEvents.status).toBe(200);
      expect(keyEvents.body.data).toEqual([]);
    }
    // An admin sees the keys' events: the owner's seed key and the two above.
    const admin = await eventually(async () => {
      const seen = ofType(await allEvents(owner.apiKey), "api_key.created");
      return seen.length >= 3 && seen;
    });
    expect(admin.map((e) => e.data.role)).toEqual(["admin", "agent", "read"]);
  });
});

describe("the event cursor on PostgreSQL", () => {
  it("never skips an event whose transaction started earlier but committed later", async () => {
    const database = await createFreshDatabase(
      process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test",
    );
    const pgServer = await createTestServer({ store: { databaseUrl: database.url } });
    const client = new pg.Client({ connectionString: database.url });
    try {
      const owner = await seedAccount(pgServer.api);
      const wallet = await pgServer.api.post("/v1/wallets", { name: "w", chains: ["base"] }, owner.apiKey);
      const read = async (after: string) => {
        const page = await pgServer.api.get(`/v1/events?after=${after}`, owner.apiKey);
        expect(page.status, page.text).toBe(200);
        return page.body as { data: EventView[]; nextCursor: string };
      };
      // Events are listed once every older transaction has ended (other databases' too): wait for the first.
      const first = await eventually(async () => {
        const page = await read("0.0");
        return page.data.length > 0 && page;
      });
      expect(first.data.map((e) => e.type)).toEqual(["api_key.created"]);

      // A change whose transaction starts now and commits last, as a slow request's would.
      await client.connect();
      await client.query("BEGIN");
      await client.query(
        `INSERT INTO events (id, account_id, wallet_id, type, data)
         SELECT 'evt_slowslowslowslowslow1', account_id, id, 'policy.updated', '{"late":true}'::json
         FROM wallets WHERE id = $1`,
        [wallet.body.id],
      );
      // Meanwhile another change commits; a reader polling now must not move its cursor past the slow one.
      const patched = await pgServer.api.request("PATCH", `/v1/wallets/${wallet.body.id}/policy`, {
        token: owner.apiKey,
        body: { maxPerTx: "5" },
      });
      expect(patched.status).toBe(200);
      const during = await read(first.nextCursor);
      expect(during.data).toEqual([]);
      expect(during.nextCursor).toBe(first.nextCursor);
      await client.query("COMMIT");

      const after = await eventually(async () => {
        const page = await read(during.nextCursor);
        return page.data.length >= 2 && page;
      });
      expect(after.data.map((e) => e.data.late ?? e.data.maxPerTx)).toEqual([true, "5"]);
    } finally {
      await client.end().catch(() => {});
      await pgServer.close();
      await database.drop();
    }
  });
});

/**
 * An account with a webhook endpoint nobody answers (each failed attempt is logged against it), and two
 * `api_key.created` events, listed: the seeded key's and one more ("A").
 */
async function accountWithUnansweredEndpoint(api: ApiClient, endpoint: Record<string, unknown> = {}) {
  const owner = await seedAccount(api);
  const created = await api.post(
    "/v1/webhook-endpoints",
    { url: "http://127.0.0.1:9/hook", ...endpoint },
    owner.apiKey,
  );
  expect(created.status, created.text).toBe(201);
  expect((await api.post("/v1/api-keys", { name: "A" }, owner.apiKey)).status).toBe(201);
  const keyEvents = await eventually(async () => {
    const page = await api.get("/v1/events?type=api_key.created", owner.apiKey);
    return page.body.data.length === 2 && (page.body.data as EventView[]);
  });
  return { owner, endpointId: created.body.id as string, keyEvents };
}

describe("events past their retention", () => {
  it("are deleted by the sweep with their webhook delivery records and queued redeliveries; later ones stay", async () => {
    const own = await createTestServer();
    try {
      const { owner, endpointId, keyEvents: oldEvents } = await accountWithUnansweredEndpoint(own.api);
      const logged = await eventually(async () => {
        const page = await own.api.get(`/v1/webhook-endpoints/${endpointId}/deliveries`, owner.apiKey);
        return page.body.data.length > 0 && page.body.data;
      });
      expect(oldEvents.map((e) => e.id)).toContain(logged[0].eventId);
      const queued = await own.api.post(
        `/v1/webhook-endpoints/${endpointId}/redeliver`,
        { eventId: oldEvents[1]?.id },
        owner.apiKey,
      );
      expect(queued.status).toBe(202);

      await new Promise((resolve) => setTimeout(resolve, 100));
      const cutoff = new Date();
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect((await own.api.post("/v1/api-keys", { name: "new" }, owner.apiKey)).status).toBe(201);

      expect(await sweepEvents(own.service.store.db, cutoff)).toBeGreaterThanOrEqual(2);
      const left = await eventually(async () => {
        const page = await own.api.get("/v1/events", owner.apiKey);
        return page.body.data.length > 0 && (page.body.data as EventView[]);
      });
      expect(left.map((e) => [e.type, e.data.name])).toEqual([["api_key.created", "new"]]);
      const deliveries = await own.api.get(`/v1/webhook-endpoints/${endpointId}/deliveries`, owner.apiKey);
      const oldIds = new Set(oldEvents.map((e) => e.id));
      expect(deliveries.body.data.filter((d: { eventId: string }) => oldIds.has(d.eventId))).toEqual([]);
      // Nothing older is left for a second sweep.
      expect(await sweepEvents(own.service.store.db, cutoff)).toBe(0);
    } finally {
      await own.close();
    }
  });
});

describe("the retention sweep beside webhook work, on PostgreSQL", () => {
  it("a redelivery asked for while the sweep deletes its event is 404, not 500", async () => {
    const database = await createFreshDatabase(
      process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test",
    );
    const pgServer = await createTestServer({ store: { databaseUrl: database.url } });
    const client = new pg.Client({ connectionString: database.url });
    try {
      const { owner, endpointId, keyEvents } = await accountWithUnansweredEndpoint(pgServer.api);
      const old = keyEvents[1] as EventView;
      // Another session holds the account's row, so the redelivery request waits at its first lock.
      await client.connect();
      await client.query("BEGIN");
      await client.query("SELECT id FROM accounts WHERE id = $1 FOR UPDATE", [owner.userId]);
      const asked = pgServer.api.post(
        `/v1/webhook-endpoints/${endpointId}/redeliver`,
        { eventId: old.id },
        owner.apiKey,
      );
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(await sweepEvents(pgServer.service.store.db, new Date(Date.now() + 60_000))).toBeGreaterThan(0);
      await client.query("COMMIT");
      const answer = await asked;
      expect(answer.status, answer.text).toBe(404);
      expect(expectErrorShape(answer)).toMatchObject({
        code: "NotFound",
        message: `Event ${old.id} not found`,
      });
    } finally {
      await client.end().catch(() => undefined);
      await pgServer.close();
      await database.drop();
    }
  });
});

describe("the retention sweep when the service stops, on PostgreSQL", () => {
  it("stopping waits for the sweep under way and starts none: no sweep fails on a closed store", async () => {
    const database = await createFreshDatabase(
      process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test",
    );
    const first = await createTestServer({ store: { databaseUrl: database.url } });
    const holder = new pg.Client({ connectionString: database.url });
    let second: Awaited<ReturnType<typeof createTestServer>> | undefined;
    try {
      // The sweep of a second instance, at its start, waits for the Idempotency-Keys another session holds.
      await holder.connect();
      await holder.query("BEGIN");
      await holder.query("LOCK TABLE idempotency_keys IN ACCESS EXCLUSIVE MODE");
      second = await createTestServer({ store: first.storeLocation });
      await eventually(
        async () =>
          (
            await holder.query(
              "SELECT 1 FROM pg_locks WHERE relation = 'idempotency_keys'::regclass AND NOT granted",
            )
          ).rowCount === 1,
        { describe: "the sweep to wait for the table" },
      );
      const stopped = second.service.close();
      const url = second.url;
      await eventually(
        async () =>
          fetch(`${url}/healthz`).then(
            () => false,
            () => true,
          ),
        {
          describe: "the second instance to stop listening",
        },
      );
      await holder.query("COMMIT");
      await stopped;
      // Before, the store closed under it, and the events' sweep after it failed: "could not sweep …".
      expect(second.logs.lines.filter((line) => line.includes("could not sweep"))).toEqual([]);
    } finally {
      await holder.end().catch(() => undefined);
      await first.close();
      await database.drop();
    }
  });
});

describe("an endpoint's failed attempts", () => {
  it("belong to their event: the next event after one the sweep deleted starts with none, and without its wait", async () => {
    const own = await createTestServer();
    try {
      const { owner, endpointId } = await accountWithUnansweredEndpoint(own.api, {
        events: ["api_key.created"],
      });
      const attemptsOnRecord = async () =>
        (
          await selectRows<{ attempts: number }>(
            own.service.store.db,
            sql`SELECT attempts FROM webhook_endpoints WHERE id = ${endpointId}`,
          )
        )[0]?.attempts;
      // Event A fails five times, moving the service's clock to each retry: its next is due 30 min later.
      await eventually(async () => (await attemptsOnRecord()) === 1, { describe: "A's first attempt" });
      for (const [attempt, delayMs] of RETRY_DELAYS_MS.slice(0, 4).entries()) {
        own.clock.advance(delayMs + 1_000);
        await eventually(async () => (await attemptsOnRecord()) === attempt + 2, {
          describe: `A's attempt ${attempt + 2}`,
        });
      }

      expect(await sweepEvents(own.service.store.db, new Date(Date.now() + 1_000))).toBeGreaterThan(0);
      await new Promise((resolve) => setTimeout(resolve, 1_100));
      expect((await own.api.post("/v1/api-keys", { name: "b" }, owner.apiKey)).status).toBe(201);
      // B, the event after it now, does not wait out A's 30 minutes.
      const deliveries = await eventually(async () => {
        const page = await own.api.get(`/v1/webhook-endpoints/${endpointId}/deliveries`, owner.apiKey);
        return page.body.data.length > 0 && (page.body.data as { eventId: string; attempt: number }[]);
      });
      expect(deliveries.map((d) => d.attempt)).toEqual([1]);
      expect(await attemptsOnRecord()).toBe(1);
    } finally {
      await own.close();
    }
  });
});
