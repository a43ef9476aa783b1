import { and, asc, eq, getTableColumns } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { events, spendHours, transactions } from "../src/internal/db/schema.ts";
import { recordTransaction, recordTransferOnce } from "../src/transactions/transactions.ts";
import { createTestServer, expectErrorShape, seedAccount, type TestServer } from "./support/test-server.ts";

let server: TestServer;
let apiKey: string;
let walletId: string;
const seeded: { id: string; chain: string; type: string }[] = [];

beforeAll(async () => {
  server = await createTestServer();
  ({ apiKey } = await seedAccount(server.api));
  const wallet = await server.api.post(
    "/v1/wallets",
    { name: "history", chains: ["base", "solana"] },
    apiKey,
  );
  walletId = wallet.body.id;
  const start = Date.UTC(2026, 0, 1);
  // 130 rows, one second apart: base sends, base receives and solana receives in turn.
  for (let i = 0; i < 130; i++) {
    const [chain, type] = (["base:send", "base:receive", "solana:receive"][i % 3] ?? "").split(":") as [
      string,
      "send" | "receive",
    ];
    const row = await recordTransaction(server.service.store.db, {
      walletId,
      type,
      chain,
      token: "USDC",
      amountAtomic: BigInt(i + 1) * 10_000n,
      decimals: 6,
      fromAddress: "sender",
      toAddress: "recipient",
      txHash: `0x${i.toString(16).padStart(64, "0")}`,
      status: "confirmed",
      createdAt: new Date(start + i * 1000),
      confirmedAt: new Date(start + i * 1000),
    });
    seeded.push({ id: row.id, chain, type });
  }
});
afterAll(() => server.close());

const newestFirst = () => [...seeded].reverse();

describe("GET /v1/wallets/:id/transactions", () => {
  it("returns 20 newest first by default with the exact total", async () => {
    const page = await server.api.get(`/v1/wallets/${walletId}/transactions`, apiKey);
    expect(page.status).toBe(200);
    expect(page.body).toMatchObject({ total: 130, limit: 20, offset: 0 });
    expect(page.body.data.map((t: { id: string }) => t.id)).toEqual(
      newestFirst()
        .slice(0, 20)
        .map((t) => t.id),
    );
    const newest = page.body.data[0];
    expect(newest).toMatchObject({
      walletId,
      type: "send",
      chain: "base",
      token: "USDC",
      amount: "1.3",
      from: "sender",
      to: "recipient",
      status: "confirmed",
      timestamp: new Date(Date.UTC(2026, 0, 1) + 129_000).toISOString(),
    });
    expect(newest.txHash).toMatch(/^0x0+81$/);
  });

  it("pages with limit and offset, and serves at most 100 however many are asked for", async () => {
    const page = await server.api.get(`/v1/wallets/${walletId}/transactions?limit=7&offset=10`, apiKey);
    expect(page.body.data.map((t: { id: string }) => t.id)).toEqual(
      newestFirst()
        .slice(10, 17)
        .map((t) => t.id),
    );
    const big = await server.api.get(`/v1/wallets/${walletId}/transactions?limit=500`, apiKey);
    expect(big.body.limit).toBe(100);
    expect(big.body.data).toHaveLength(100);
    const past = await server.api.get(`/v1/wallets/${walletId}/transactions?offset=1000`, apiKey);
    expect(past.body).toMatchObject({ data: [], total: 130, offset: 1000 });
  });

  it("filters by chain and by type, with totals that match the filter", async () => {
    const solana = await server.api.get(
      `/v1/wallets/${walletId}/transactions?chain=solana&limit=100`,
      apiKey,
    );
    const expectedSolana = newestFirst().filter((t) => t.chain === "solana");
    expect(solana.body.total).toBe(expectedSolana.length);
    expect(solana.body.data.map((t: { id: string }) => t.id)).toEqual(expectedSolana.map((t) => t.id));
    const baseReceives = await server.api.get(
      `/v1/wallets/${walletId}/transactions?chain=base&type=receive&limit=100`,
      apiKey,
    );
    const expected = newestFirst().filter((t) => t.chain === "base" && t.type === "receive");
    expect(baseReceives.body.total).toBe(expected.length);
    expect(baseReceives.body.data.map((t: { id: string }) => t.id)).toEqual(expected.map((t) => t.id));
    const x402 = await server.api.get(`/v1/wallets/${walletId}/transactions?type=x402`, apiKey);
    expect(x402.body).toMatchObject({ data: [], total: 0 });
  });

  it.each([
    "limit=0",
    "limit=-1",
    "limit=abc",
    "limit=1.5",
    "offset=-3",
    "offset=1e3",
    "type=refund",
    "chain=dogecoin",
    "limit=1&limit=2",
    "unknown=1",
  ])("rejects the query %s with 400 ValidationError", async (query) => {
    const response = await server.api.get(`/v1/wallets/${walletId}/transactions?${query}`, apiKey);
    expect(response.status).toBe(400);
    expect(expectErrorShape(response)).toMatchObject({ code: "ValidationError", reason: "invalid_query" });
  });

  it("answers 404 for an unknown wallet", async () => {
    const response = await server.api.get("/v1/wallets/wal_unknown0000000000000000/transactions", apiKey);
    expect(response.status).toBe(404);
  });

  it("counts the total in the same snapshot as the page while transfers are being recorded", async () => {
    const wallet = await server.api.post("/v1/wallets", { name: "busy", chains: ["base"] }, apiKey);
    expect(wallet.status).toBe(201);
    let recording = true;
    const recorder = (async () => {
      try {
        for (let i = 0; i < 100; i++) {
          await recordTransaction(server.service.store.db, {
            walletId: wallet.body.id,
            type: "receive",
            chain: "base",
            token: "USDC",
            amountAtomic: 1n,
            decimals: 6,
            fromAddress: "sender",
            toAddress: "recipient",
            txHash: `0x${(i + 1000).toString(16).padStart(64, "0")}`,
            status: "confirmed",
            confirmedAt: new Date(),
          });
        }
      } finally {
        recording = false;
      }
    })();
    // Every row fits in one page of 100, so a page that disagrees with its total counted another moment.
    const mismatches: string[] = [];
    let reads = 0;
    while (recording || reads === 0) {
      const page = await server.api.get(`/v1/wallets/${wallet.body.id}/transactions?limit=100`, apiKey);
      expect(page.status).toBe(200);
      reads++;
      if (page.body.total !== page.body.data.length)
        mismatches.push(`${page.body.data.length}/${page.body.total}`);
    }
    await recorder;
    expect(mismatches).toEqual([]);
    const last = await server.api.get(`/v1/wallets/${wallet.body.id}/transactions?limit=100`, apiKey);
    expect(last.body).toMatchObject({ total: 100 });
    expect(last.body.data).toHaveLength(100);
  });
});

describe("recordTransaction", () => {
  it("writes every column itself: no column of transactions but created_at has a default it would bypass", () => {
    const defaulted = Object.entries(getTableColumns(transactions))
      .filter(([, column]) => column.hasDefault)
      .map(([key]) => key);
    expect(defaulted).toEqual(["createdAt"]);
  });

  it("returns the row exactly as the store holds it, and writes its events and hour bucket in the same statement", async () => {
    const db = server.service.store.db;
    const createdAt = new Date(Date.UTC(2026, 0, 2, 10, 30));
    const row = await recordTransaction(
      db,
      {
        walletId,
        type: "send",
        chain: "base",
        token: "USDC",
        amountAtomic: 123_456_789n,
        decimals: 6,
        fromAddress: "sender",
        toAddress: "recipient",
        status: "pending",
        usdMicros: 123_456_789n,
        nonce: 7,
        rawTx: "0x02",
        txHash: `0x${"ab".repeat(32)}`,
        x402Payment: { nonce: "0x01" },
        broadcastAt: createdAt,
        createdAt,
      },
      {
        events: (view) => [{ type: "spend.alert", data: { alertAbove: "1.00", transaction: view } }],
        reservedUsdMicros: 123_456_789n,
      },
    );
    const [stored] = await db.select().from(transactions).where(eq(transactions.id, row.id));
    expect(row).toEqual(stored);
    const written = await db
      .select()
      .from(events)
      .where(eq(events.walletId, walletId))
      .orderBy(asc(events.seq));
    const mine = written.filter((event) => JSON.stringify(event.data).includes(row.id));
    expect(mine.map((event) => event.type)).toEqual(["transaction.created", "spend.alert"]);
    expect(mine[0]?.data).toMatchObject({ id: row.id, amount: "123.456789", status: "pending" });
    const [bucket] = await db
      .select()
      .from(spendHours)
      .where(and(eq(spendHours.walletId, walletId), eq(spendHours.hour, new Date(Date.UTC(2026, 0, 2, 10)))));
    expect(bucket?.usdMicros).toBe(123_456_789n);
  });

  it("records a transfer once however many record it at once, announcing it once", async () => {
    const db = server.service.store.db;
    const txHash = `0x${"cd".repeat(32)}`;
    const attempts = await Promise.all(
      Array.from({ length: 10 }, () =>
        recordTransferOnce(db, {
          walletId,
          type: "receive",
          chain: "base",
          token: "USDC",
          amountAtomic: 5n,
          decimals: 6,
          fromAddress: "sender",
          toAddress: "recipient",
          txHash,
          transferIndex: 3,
          status: "confirmed",
          confirmedAt: new Date(),
        }),
      ),
    );
    const recorded = attempts.filter((row) => row !== undefined);
    expect(recorded).toHaveLength(1);
    const rows = await db.select().from(transactions).where(eq(transactions.txHash, txHash));
    expect(rows).toEqual(recorded);
    const announced = (await db.select().from(events).where(eq(events.walletId, walletId))).filter(
      (event) => (event.data as { txHash?: string }).txHash === txHash,
    );
    expect(announced.map((event) => [event.type, (event.data as { id: string }).id])).toEqual([
      ["transaction.received", recorded[0]?.id],
    ]);
  });
});
