import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { PGlite } from "@electric-sql/pglite";
import { hash } from "@node-rs/argon2";
import { fundEvm } from "@svc/devnet";
import { sql } from "drizzle-orm";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { requestFingerprint } from "../src/idempotency/idempotency.ts";
import { hashApiKey } from "../src/internal/crypto.ts";
import { type StoreLocation, selectRows } from "../src/internal/db/store.ts";
import { Keyring } from "../src/wallets/keyring.ts";
import { initializedPglite } from "./support/pglite-setup.ts";
import {
  createFreshDatabase,
  createTestServer,
  expectErrorShape,
  STORE_KIND,
  sharedDevnet,
  TEST_MASTER_KEY,
} from "./support/test-server.ts";

const MIGRATIONS = fileURLToPath(new URL("../src/internal/db/migrations/", import.meta.url));
const migrationFiles = readdirSync(MIGRATIONS)
  .filter((file) => /^\d{4}_.+\.sql$/.test(file))
  .sort();

let cleanup: () => Promise<void> = async () => {};
afterAll(() => cleanup());

/**
 * A store exactly as the release with the first `count` migrations left it: `schema_migrations` (as store.ts
 * creates it) and those migrations, on PGlite or PostgreSQL as the suite runs.
 */
async function storeAtMigration(count: number): Promise<{
  location: StoreLocation;
  exec(text: string, params?: unknown[]): Promise<void>;
  close(): Promise<void>;
}> {
  const applied = migrationFiles.slice(0, count).map(
    (file) => `BEGIN;
${readFileSync(join(MIGRATIONS, file), "utf8")}
INSERT INTO schema_migrations (version, name) VALUES (${Number(file.slice(0, 4))}, '${file}');
COMMIT;`,
  );
  const script = `CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now());
${applied.join("\n")}`;
  if (STORE_KIND === "postgres") {
    const db = await createFreshDatabase();
    cleanup = db.drop;
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    await client.query(script);
    return {
      location: { databaseUrl: db.url },
      exec: async (text, params) => void (await client.query(text, params)),
      close: () => client.end(),
    };
  }
  const dir = mkdtempSync(join(tmpdir(), "svc-migrate-"));
  cleanup = async () => rmSync(dir, { recursive: true, force: true });
  // A data directory PGlite initialized (initdb), before any migration.
  const client = await PGlite.create({ dataDir: dir, loadDataDir: initializedPglite() });
  await client.exec(script);
  return {
    location: { pgliteDir: dir },
    exec: async (text, params) => void (await client.query(text, params)),
    close: () => client.close(),
  };
}

/**
 * A store as the release before migration `prefix` (e.g. "0017_") left it, holding one account and its wallet
 * `walletId` on `chains` (EVM address 0x3333…3333).
 */
async function storeBeforeWithWallet(prefix: string, walletId: string, chains: readonly string[]) {
  const at = migrationFiles.findIndex((file) => file.startsWith(prefix));
  expect(at).toBeGreaterThan(0);
  const old = await storeAtMigration(at);
  await old.exec(
    "INSERT INTO accounts (id, email, password_hash) VALUES ('usr_old', 'old@example.com', 'x')",
  );
  await old.exec(
    `INSERT INTO wallets (id, account_id, name, chains, evm_address, wrapped_data_key)
     VALUES ($1, 'usr_old', 'old', $2, '0x3333333333333333333333333333333333333333', '\\x00')`,
    [walletId, JSON.stringify(chains)],
  );
  return old;
}

describe("a database created by the first migration", () => {
  it(`is upgraded to the last one by a normal start, its rows intact and new columns at their defaults (${STORE_KIND})`, async () => {
    expect(migrationFiles.length).toBeGreaterThan(1);
    const old = await storeAtMigration(1);
    // Representative rows of the first release: an account with a password, an API key, a wallet with its
    // sealed keys (under the suite's master key), a policy, and a received and a sent transaction.
    const accountId = "usr_firstrelease0000000001";
    const email = "first@example.com";
    const password = "first-release-password";
    const apiKey = `svc_${"A".repeat(40)}`;
    const walletId = "wal_firstrelease0000000001";
    const sealed = new Keyring(Buffer.from(TEST_MASTER_KEY, "base64")).generateWalletKeys(walletId, [
      "evm",
      "solana",
    ]);
    const evm = sealed.keys.find((k) => k.kind === "evm");
    const solana = sealed.keys.find((k) => k.kind === "solana");
    if (!evm || !solana) throw new Error("keys not generated");
    await old.exec("INSERT INTO accounts (id, email, password_hash) VALUES ($1, $2, $3)", [
      accountId,
      email,
      await hash(password),
    ]);
    await old.exec("INSERT INTO api_keys (id, account_id, name, key_hash) VALUES ($1, $2, $3, $4)", [
      "key_firstrelease0000000001",
      accountId,
      "tooling",
      hashApiKey(apiKey),
    ]);
    await old.exec(
      `INSERT INTO wallets (id, account_id, name, chains, evm_address, solana_address, wrapped_data_key)
       VALUES ($1, $2, 'treasury', '["base","solana"]', $3, $4, $5)`,
      [walletId, accountId, evm.address, solana.address, sealed.wrappedDataKey],
    );
    for (const key of [evm, solana]) {
      await old.exec(
        "INSERT INTO wallet_keys (wallet_id, chain_kind, encrypted_private_key) VALUES ($1, $2, $3)",
        [walletId, key.kind, key.encryptedPrivateKey],
      );
    }
    await old.exec(
      `INSERT INTO wallet_policies (wallet_id, max_per_tx_micros, daily_limit_micros, whitelist)
       VALUES ($1, 10000000, 50000000, '["0x1111111111111111111111111111111111111111"]')`,
      [walletId],
    );
    await old.exec(
      `INSERT INTO transactions (id, wallet_id, type, chain, token, amount_atomic, decimals, from_address,
         to_address, tx_hash, status, created_at, confirmed_at)
       VALUES ('tx_firstrelease00000000001', $1, 'receive', 'base', 'USDC', 5000000, 6, $2, $3, $4, 'confirmed',
         now() - interval '2 days', now() - interval '2 days'),
              ('tx_firstrelease00000000002', $1, 'send', 'base', 'USDC', 1000000, 6, $3, $2, $5, 'confirmed',
         now() - interval '1 day', now() - interval '1 day')`,
      [
        walletId,
        "0x2222222222222222222222222222222222222222",
        evm.address,
        `0x${"a".repeat(64)}`,
        `0x${"b".repeat(64)}`,
      ],
    );
    await old.exec(
      `INSERT INTO transaction_counts (wallet_id, chain, type, count) VALUES ($1, 'base', 'receive', 1),
       ($1, 'base', 'send', 1)`,
      [walletId],
    );
    await old.close();

    // The current service opens it as it opens any store: every later migration is applied.
    const server = await createTestServer({ store: old.location });
    try {
      const db = server.service.store.db;
      const versions = await selectRows<{ version: number }>(
        db,
        sql`SELECT version FROM schema_migrations ORDER BY version`,
      );
      expect(versions.map((v) => Number(v.version))).toEqual(
        migrationFiles.map((f) => Number(f.slice(0, 4))),
      );

      // The rows survive, read through the API.
      const login = await server.api.post("/v1/auth/login", { email, password });
      expect(login.status, login.text).toBe(200);
      const token = login.body.accessToken;
      const [wallet] = (await server.api.get("/v1/wallets", apiKey)).body;
      expect(wallet).toMatchObject({
        id: walletId,
        name: "treasury",
        chains: ["base", "solana"],
        evm: { address: evm.address },
        solana: { address: solana.address },
        status: "active",
      });
      // New columns at their defaults: the old key became an agent key for every wallet, without expiry;
      // the policy does not require a spend authorization.
      expect((await server.api.get("/v1/api-keys", token)).body).toEqual([
        expect.objectContaining({ name: "tooling", role: "agent", walletIds: null, expiresAt: null }),
      ]);
      expect((await server.api.get(`/v1/wallets/${walletId}/policy`, apiKey)).body).toMatchObject({
        maxPerTx: "10",
        dailyLimit: "50",
        whitelist: ["0x1111111111111111111111111111111111111111"],
        requireSpendAuthorization: false,
        status: "active",
      });
      const history = (await server.api.get(`/v1/wallets/${walletId}/transactions`, apiKey)).body;
      expect(history.total).toBe(2);
      expect(
        history.data.map((t: { id: string; amount: string; status: string }) => [t.id, t.amount, t.status]),
      ).toEqual([
        ["tx_firstrelease00000000002", "1", "confirmed"],
        ["tx_firstrelease00000000001", "5", "confirmed"],
      ]);
      const [oldRow] = await selectRows<Record<string, unknown>>(
        db,
        sql`SELECT usd_micros, raw_tx, nonce, transfer_index, spend_decision_id FROM transactions WHERE id = 'tx_firstrelease00000000002'`,
      );
      expect(oldRow).toEqual({
        usd_micros: null,
        raw_tx: null,
        nonce: null,
        transfer_index: null,
        spend_decision_id: null,
      });
      // The agent key may no longer create wallets (an upgrade narrows what an old key can do).
      const created = await server.api.post("/v1/wallets", { name: "x", chains: ["base"] }, apiKey);
      expect(expectErrorShape(created)).toMatchObject({ code: "Forbidden", reason: "insufficient_role" });

      // The wallet's key, sealed by the first release, still signs: a send goes out and confirms.
      await fundEvm(await sharedDevnet(), evm.address as `0x${string}`, {
        eth: 10n ** 17n,
        usdc: 3_000_000n,
      });
      const sent = await server.api.post(
        `/v1/wallets/${walletId}/send`,
        { to: "0x1111111111111111111111111111111111111111", amount: "2", chain: "base" },
        apiKey,
      );
      expect(sent.status, sent.text).toBe(201);
      expect(sent.body).toMatchObject({ from: evm.address, amount: "2", status: "pending" });
    } finally {
      await server.close();
    }
  });
});

describe("0010: Idempotency-Keys stored before their namespaces could not be forged", () => {
  it(`still replay their answers to their own credentials after the upgrade (${STORE_KIND})`, async () => {
    const at = migrationFiles.findIndex((file) => file.startsWith("0010_"));
    expect(at).toBeGreaterThan(0);
    const old = await storeAtMigration(at);
    const accountId = "usr_idempotency00000000001";
    const walletId = "wal_idempotency00000000001";
    const [boundKey, everyKey] = [`svc_${"B".repeat(40)}`, `svc_${"E".repeat(40)}`];
    await old.exec("INSERT INTO accounts (id, email, password_hash) VALUES ($1, 'i@example.com', 'x')", [
      accountId,
    ]);
    await old.exec(
      `INSERT INTO api_keys (id, account_id, name, key_hash, role, wallet_ids) VALUES
         ('key_bound000000000000000001', $1, 'bound', $2, 'agent', $4),
         ('key_every000000000000000001', $1, 'every', $3, 'agent', NULL)`,
      [accountId, hashApiKey(boundKey), hashApiKey(everyKey), JSON.stringify([walletId])],
    );
    // Answers as the old service stored them: the bound key's under its id, the other's as sent.
    const body = { to: "0x1111111111111111111111111111111111111111", amount: "1", chain: "base" };
    const fingerprint = requestFingerprint("POST", "/v1/wallets/:id/send", {
      params: { id: walletId },
      body: { ...body, token: "USDC" },
    });
    // The answer of a send: a transaction.
    const answer = (id: string) => ({
      id,
      walletId,
      type: "send",
      amount: "1",
      token: "USDC",
      chain: "base",
      to: body.to,
      from: "0x2222222222222222222222222222222222222222",
      timestamp: "2026-11-20T00:00:00.000Z",
      status: "pending",
    });
    for (const [key, id] of [
      ["key_bound000000000000000001:inv-1", "tx_bound000000000000000001"],
      ["order:42", "tx_every000000000000000001"],
    ] as const) {
      await old.exec(
        `INSERT INTO idempotency_keys (account_id, key, request_hash, state, response_status, response_body)
         VALUES ($1, $2, $3, 'completed', 201, $4)`,
        [accountId, key, fingerprint, JSON.stringify(answer(id))],
      );
    }
    await old.close();

    const server = await createTestServer({ store: old.location });
    try {
      for (const [apiKey, key, id] of [
        [boundKey, "inv-1", "tx_bound000000000000000001"],
        [everyKey, "order:42", "tx_every000000000000000001"],
      ] as const) {
        const retried = await server.api.post(`/v1/wallets/${walletId}/send`, body, apiKey, {
          "idempotency-key": key,
        });
        expect(retried.status, retried.text).toBe(201);
        expect(retried.headers.get("idempotent-replayed")).toBe("true");
        expect(retried.body).toEqual(answer(id));
      }
    } finally {
      await server.close();
    }
  });
});

describe("0017: faucet grants that recorded one transaction between them", () => {
  it(`are reduced to the earliest, and no later grant can record it again (${STORE_KIND})`, async () => {
    const walletId = "wal_faucetgrants0000000001";
    const old = await storeBeforeWithWallet("0017_", walletId, ["base", "solana"]);
    const [shared, own] = [`0x${"a".repeat(64)}`, `0x${"b".repeat(64)}`];
    // Two requests answered with one payment (the second recorded later), a payment of its own, the same hash
    // on another chain, and two grants whose payment was not yet signed.
    await old.exec(
      `INSERT INTO faucet_grants (id, wallet_id, chain, token, amount_atomic, tx_hash, created_at) VALUES
         ('grant-first', $1, 'base', 'USDC', 1000000, $2, now() - interval '2 minutes'),
         ('grant-second', $1, 'base', 'USDC', 1000000, $2, now() - interval '1 minute'),
         ('grant-own', $1, 'base', 'USDC', 1000000, $3, now()),
         ('grant-elsewhere', $1, 'solana', 'USDC', 1000000, $2, now()),
         ('grant-unsigned-1', $1, 'base', 'USDC', 1000000, NULL, now()),
         ('grant-unsigned-2', $1, 'base', 'USDC', 1000000, NULL, now())`,
      [walletId, shared, own],
    );
    await old.close();

    const server = await createTestServer({ store: old.location });
    try {
      const db = server.service.store.db;
      const grants = await selectRows<{ id: string }>(db, sql`SELECT id FROM faucet_grants ORDER BY id`);
      expect(grants.map((grant) => grant.id)).toEqual([
        "grant-elsewhere",
        "grant-first",
        "grant-own",
        "grant-unsigned-1",
        "grant-unsigned-2",
      ]);
      await expect(
        db.execute(sql`UPDATE faucet_grants SET tx_hash = ${own} WHERE id = 'grant-unsigned-1'`),
      ).rejects.toMatchObject({ cause: { code: "23505", constraint: "faucet_grants_tx_hash_key" } });
    } finally {
      await server.close();
    }
  });
});

describe("0021: spends recorded before their admission order", () => {
  it(`are numbered in the order of their dates, and the spends admitted after them higher (${STORE_KIND})`, async () => {
    const walletId = "wal_admissionorder00000001";
    const old = await storeBeforeWithWallet("0021_", walletId, ["base"]);
    // Recorded out of the order of their dates; a receive, a spend held for approval and one refused then.
    const rows: [string, string, string, number][] = [
      ["tx_x402pending", "x402", "pending", 2],
      ["tx_sendconfirmed", "send", "confirmed", 5],
      ["tx_received", "receive", "confirmed", 4],
      ["tx_sendfailed", "send", "failed", 3],
      ["tx_held", "send", "pending_approval", 1],
      ["tx_refused", "send", "rejected", 6],
    ];
    for (const [id, type, status, minutesAgo] of rows)
      await old.exec(
        `INSERT INTO transactions (id, wallet_id, type, chain, token, amount_atomic, decimals, from_address,
           to_address, status, created_at)
         VALUES ($1, $2, $3, 'base', 'USDC', 1, 6, '0x3333333333333333333333333333333333333333',
           '0x5555555555555555555555555555555555555555', $4, now() - $5 * interval '1 minute')`,
        [id, walletId, type, status, minutesAgo],
      );
    await old.close();

    const server = await createTestServer({ store: old.location });
    try {
      const db = server.service.store.db;
      const numbered = await selectRows<{ id: string; seq: string | null }>(
        db,
        sql`SELECT id, admission_seq::text AS seq FROM transactions ORDER BY admission_seq NULLS LAST, id`,
      );
      expect(numbered).toEqual([
        { id: "tx_sendconfirmed", seq: "1" },
        { id: "tx_sendfailed", seq: "2" },
        { id: "tx_x402pending", seq: "3" },
        { id: "tx_held", seq: null },
        { id: "tx_received", seq: null },
        { id: "tx_refused", seq: null },
      ]);
      const [next] = await selectRows<{ seq: string }>(
        db,
        sql`SELECT nextval('transactions_admission_seq')::text AS seq`,
      );
      expect(next?.seq).toBe("4");
    } finally {
      await server.close();
    }
  });
});
