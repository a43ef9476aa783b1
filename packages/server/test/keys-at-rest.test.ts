import { randomBytes } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { getBase58Decoder } from "@solana/kit";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../src/internal/config.ts";
import { selectRows } from "../src/internal/db/store.ts";
import { startService } from "../src/service.ts";
import { MasterKeyMismatchError } from "../src/wallets/keyring.ts";
import { openStoredKey } from "./support/keys.ts";
import {
  createTestServer,
  expectErrorShape,
  LogCapture,
  STORE_KIND,
  seedAccount,
  type TestServer,
} from "./support/test-server.ts";

let server: TestServer;
beforeAll(async () => {
  server = await createTestServer();
});
afterAll(() => server.close());

/** Every encoding of a key we could imagine finding in a dump. */
function encodings(secret: Buffer): string[] {
  return [
    secret.toString("hex"),
    secret.toString("hex").toUpperCase(),
    secret.toString("base64"),
    secret.toString("base64url"),
    getBase58Decoder().decode(secret),
  ];
}

function privateKeysOf(walletId: string): Promise<Buffer[]> {
  return Promise.all(
    (["evm", "solana"] as const).map((kind) => openStoredKey(server.service, walletId, kind)),
  );
}

describe("private keys at rest", () => {
  it("appear in no encoding in a dump of every table", async () => {
    const { apiKey } = await seedAccount(server.api);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      ids.push(
        (await server.api.post("/v1/wallets", { name: `w${i}`, chains: ["base", "solana"] }, apiKey)).body.id,
      );
    }
    const db = server.service.store.db;
    const tables = (
      await selectRows<{ table_name: string }>(
        db,
        sql`SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`,
      )
    ).map((r) => r.table_name);
    expect(tables).toContain("wallet_keys");
    let dump = "";
    for (const table of tables) {
      // Text form of every column, bytea included (as PostgreSQL prints it: \x + hex).
      const rows = await selectRows<{ row: string }>(db, sql.raw(`SELECT t::text AS row FROM "${table}" t`));
      dump += rows.map((r) => r.row).join("\n");
    }
    expect(dump.length).toBeGreaterThan(1000);
    for (const id of ids) {
      const secrets = await privateKeysOf(id);
      expect(secrets).toHaveLength(2);
      for (const secret of secrets) {
        for (const encoded of encodings(secret))
          expect(dump.includes(encoded), "private key found in dump").toBe(false);
        expect(dump.toLowerCase().includes(secret.toString("hex"))).toBe(false);
      }
    }
    // The API key's value is not stored either: only its hash.
    expect(dump.includes(apiKey)).toBe(false);
  });

  it.runIf(STORE_KIND === "pglite")(
    "appear in no data file of the embedded store, and a restart keeps everything",
    async () => {
      const dataDir = mkdtempSync(join(tmpdir(), "svc-rest-"));
      const env = { PORT: "0", SVC_DATA_DIR: dataDir, LOG_LEVEL: "warn" };
      try {
        const first = await startService(loadConfig(env), { logDestination: new LogCapture() });
        const { ApiClient } = await import("./support/test-server.ts");
        const api = new ApiClient(first.url);
        const account = await seedAccount(api);
        const wallet = (
          await api.post("/v1/wallets", { name: "kept", chains: ["base", "solana"] }, account.apiKey)
        ).body;
        const secrets = await Promise.all(
          (["evm", "solana"] as const).map((kind) => openStoredKey(first, wallet.id, kind)),
        );
        await first.close();

        // The generated master key and JWT secret are files only their owner can read.
        for (const file of ["master.key", "jwt.secret"]) {
          expect(statSync(join(dataDir, file)).mode & 0o777).toBe(0o600);
        }
        const files: string[] = [];
        const walk = (dir: string) => {
          for (const entry of readdirSync(dir, { withFileTypes: true })) {
            const path = join(dir, entry.name);
            if (entry.isDirectory()) walk(path);
            else files.push(path);
          }
        };
        walk(join(dataDir, "pg"));
        for (const file of files) {
          const bytes = readFileSync(file);
          for (const secret of secrets) {
            expect(bytes.includes(secret), `raw key bytes in ${file}`).toBe(false);
            for (const encoded of encodings(secret))
              expect(bytes.includes(Buffer.from(encoded)), `encoded key in ${file}`).toBe(false);
          }
        }

        const second = await startService(loadConfig(env), { logDestination: new LogCapture() });
        try {
          const api2 = new ApiClient(second.url);
          expect((await api2.get(`/v1/wallets/${wallet.id}`, account.apiKey)).body).toEqual(wallet);
          const login = await api2.post("/v1/auth/login", {
            email: account.email,
            password: account.password,
          });
          expect(login.status).toBe(200);
        } finally {
          await second.close();
        }
      } finally {
        rmSync(dataDir, { recursive: true, force: true });
      }
    },
  );

  it("refuses to start from a data directory whose master.key is not a key, as a configuration error", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "svc-mk-"));
    try {
      writeFileSync(join(dataDir, "master.key"), "not a key\n", { mode: 0o600 });
      const attempt = startService(loadConfig({ PORT: "0", SVC_DATA_DIR: dataDir }), {
        store: { pgliteMemory: true },
        logDestination: new LogCapture(),
      });
      // A ConfigError is what `npm start` prints as one line, without a stack.
      await expect(attempt).rejects.toThrow(ConfigError);
      await expect(attempt).rejects.toThrow(
        `${join(dataDir, "master.key")} does not hold a 32-byte base64 key`,
      );
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it("refuses to start with a master key other than the store's, with a clear error", async () => {
    const other = loadConfig({
      PORT: "0",
      SVC_MASTER_KEY: Buffer.alloc(32, 7).toString("base64"),
      SVC_JWT_SECRET: "x".repeat(40),
    });
    if (STORE_KIND === "pglite") {
      const dataDir = mkdtempSync(join(tmpdir(), "svc-mk-"));
      try {
        const first = await startService(loadConfig({ PORT: "0", SVC_DATA_DIR: dataDir }), {
          logDestination: new LogCapture(),
        });
        await first.close();
        const attempt = startService({ ...other, dataDir }, { logDestination: new LogCapture() });
        await expect(attempt).rejects.toThrow(MasterKeyMismatchError);
        await expect(attempt).rejects.toThrow(
          "SVC_MASTER_KEY does not match the key this database was created with; wallet keys cannot be opened (instances on one database share SVC_MASTER_KEY)",
        );
      } finally {
        rmSync(dataDir, { recursive: true, force: true });
      }
    } else {
      const attempt = startService(other, { store: server.storeLocation, logDestination: new LogCapture() });
      await expect(attempt).rejects.toThrow(
        "SVC_MASTER_KEY does not match the key this database was created with; wallet keys cannot be opened (instances on one database share SVC_MASTER_KEY)",
      );
    }
  });

  it.runIf(STORE_KIND === "postgres")(
    "names the master key generated into a second instance's data directory, not SVC_MASTER_KEY, when it does not fit",
    async () => {
      const dataDir = mkdtempSync(join(tmpdir(), "svc-mk-"));
      try {
        const generated = { ...loadConfig({ PORT: "0", SVC_DATA_DIR: dataDir }), masterKey: undefined };
        const attempt = startService(generated, {
          store: server.storeLocation,
          logDestination: new LogCapture(),
        });
        // Before: "SVC_MASTER_KEY does not match…", a variable its user never set.
        await expect(attempt).rejects.toThrow(
          `the master key in ${join(dataDir, "master.key")} does not match the key this database was created with; wallet keys cannot be opened (instances on one database share SVC_MASTER_KEY)`,
        );
      } finally {
        rmSync(dataDir, { recursive: true, force: true });
      }
    },
  );

  it("refuses a key moved to another wallet: it does not open there, and a send answers wallet_key_unusable", async () => {
    const { apiKey } = await seedAccount(server.api);
    const create = async (name: string) =>
      (await server.api.post("/v1/wallets", { name, chains: ["base", "solana"] }, apiKey)).body as {
        id: string;
        evm: { address: `0x${string}` };
      };
    const victim = await create("A");
    const target = await create("B");
    // B holds what the send needs, so nothing but its key stands in the way.
    for (const [token, amount] of [
      ["USDC", "5"],
      ["ETH", "0.01"],
    ]) {
      const paid = await server.api.post(
        `/v1/wallets/${target.id}/faucet`,
        { chain: "base", token, amount },
        apiKey,
      );
      expect(paid.status, paid.text).toBe(201);
    }
    const db = server.service.store.db;
    const keyRow = async (walletId: string) =>
      (
        await selectRows<{ encrypted_private_key: Buffer | Uint8Array }>(
          db,
          sql`SELECT encrypted_private_key FROM wallet_keys WHERE wallet_id = ${walletId} AND chain_kind = 'evm'`,
        )
      )[0]?.encrypted_private_key;
    const wrappedKey = async (walletId: string) =>
      (
        await selectRows<{ wrapped_data_key: Buffer | Uint8Array }>(
          db,
          sql`SELECT wrapped_data_key FROM wallets WHERE id = ${walletId}`,
        )
      )[0]?.wrapped_data_key;
    const victimKey = Buffer.from((await keyRow(victim.id)) ?? []);
    const victimWrapped = Buffer.from((await wrappedKey(victim.id)) ?? []);
    const victimSecret = (await privateKeysOf(victim.id))[0] as Buffer;
    const targetWrapped = Buffer.from((await wrappedKey(target.id)) ?? []);

    // The whole envelope moved: A's data key and A's private key, now stored as B's. Both ciphertexts are
    // intact; only the wallet id bound into them as associated data differs, and that alone refuses them.
    await db.execute(sql`UPDATE wallets SET wrapped_data_key = ${victimWrapped} WHERE id = ${target.id}`);
    await db.execute(
      sql`UPDATE wallet_keys SET encrypted_private_key = ${victimKey} WHERE wallet_id = ${target.id} AND chain_kind = 'evm'`,
    );
    expect(() => server.service.keyring.openPrivateKey(target.id, "evm", victimWrapped, victimKey)).toThrow(
      expect.objectContaining({ reason: "wallet_key_unusable" }),
    );
    // Opened as A's, the same bytes still work: it is the binding that refuses them.
    expect(server.service.keyring.openPrivateKey(victim.id, "evm", victimWrapped, victimKey)).toEqual(
      victimSecret,
    );

    const recipient = "0x1111111111111111111111111111111111111111";
    const send = await server.api.post(
      `/v1/wallets/${target.id}/send`,
      { to: recipient, amount: "1", chain: "base" },
      apiKey,
    );
    expect(send.status).toBe(500);
    const error = expectErrorShape(send);
    expect(error).toMatchObject({
      code: "InternalError",
      reason: "wallet_key_unusable",
      message: `The stored signing key of wallet ${target.id} does not open for this wallet; nothing was signed. The request id locates it in the log`,
      details: { walletId: target.id },
    });
    // Nothing signed or recorded, nothing of the key in the answer or the log (which names the request).
    expect((await server.api.get(`/v1/wallets/${target.id}/transactions?type=send`, apiKey)).body.total).toBe(
      0,
    );
    for (const secret of [...encodings(victimSecret), ...encodings(victimKey), ...encodings(victimWrapped)]) {
      expect(send.text).not.toContain(secret);
      expect(server.logs.text()).not.toContain(secret);
    }
    expect(
      server.logs.lines.some((line) => line.includes(error.requestId) && line.includes("request failed")),
    ).toBe(true);

    // Only the private key moved (B keeps its own data key): refused the same way.
    await db.execute(sql`UPDATE wallets SET wrapped_data_key = ${targetWrapped} WHERE id = ${target.id}`);
    const again = await server.api.post(
      `/v1/wallets/${target.id}/send`,
      { to: recipient, amount: "1", chain: "base" },
      apiKey,
    );
    expect(again.status).toBe(500);
    expect(expectErrorShape(again).reason).toBe("wallet_key_unusable");
    // A itself still signs with its own key.
    expect((await privateKeysOf(victim.id))[0]).toEqual(victimSecret);
  });
});

describe.runIf(STORE_KIND === "postgres")("the JWT secret of the instances on one PostgreSQL", () => {
  it("refuses an instance with another one while an instance runs; alone, it takes its place and logins issued before end", async () => {
    const first = await createTestServer();
    let second: TestServer | undefined;
    try {
      const owner = await seedAccount(first.api);
      const rotated = { SVC_JWT_SECRET: randomBytes(32).toString("hex") };
      // Before, it started, and each instance refused the logins of the other: 401 at random behind a
      // load balancer.
      const beside = createTestServer({ store: first.storeLocation, env: rotated });
      await expect(beside).rejects.toThrow(ConfigError);
      await expect(beside).rejects.toThrow(
        "SVC_JWT_SECRET is not the JWT secret of the instances running on this database: each would refuse the logins of the others; give every instance the same SVC_JWT_SECRET (and SVC_MASTER_KEY)",
      );
      expect((await first.api.get("/v1/wallets", owner.accessToken)).status).toBe(200);

      // With none running, a new secret is a rotation.
      await first.service.close();
      second = await createTestServer({ store: first.storeLocation, env: rotated });
      expect(second.logs.text()).toContain("logins issued before end");
      expect((await second.api.get("/v1/wallets", owner.accessToken)).status).toBe(401);
      const login = await second.api.post("/v1/auth/login", { email: owner.email, password: owner.password });
      expect(login.status, login.text).toBe(200);
      expect((await second.api.get("/v1/wallets", login.body.accessToken)).status).toBe(200);
      // API keys are not signed with it: they go on working.
      expect((await second.api.get("/v1/wallets", owner.apiKey)).status).toBe(200);
    } finally {
      await second?.service.close();
      await first.close();
    }
  });
});
