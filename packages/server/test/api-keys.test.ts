import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureAccessTokenLive } from "../src/accounts/accounts.ts";
import { ensureApiKeyLive } from "../src/api-keys/api-keys.ts";
import { selectRows, type Tx } from "../src/internal/db/store.ts";
import { eventually } from "./support/eventually.ts";
import {
  createTestServer,
  expectErrorShape,
  STORE_KIND,
  seedAccount,
  slowRequest,
  type TestServer,
} from "./support/test-server.ts";

let server: TestServer;
beforeAll(async () => {
  server = await createTestServer();
});
afterAll(() => server.close());

describe("API keys", () => {
  it("creates a key shown once as svc_ followed by at least 32 base62 characters", async () => {
    const { accessToken } = await seedAccount(server.api);
    const created = await server.api.post("/v1/api-keys", { name: "deploy bot" }, accessToken);
    expect(created.status).toBe(201);
    expect(created.body.key).toMatch(/^svc_[0-9A-Za-z]{32,}$/);
    expect(created.body).toMatchObject({
      name: "deploy bot",
      role: "agent",
      walletIds: null,
      expiresAt: null,
      lastUsed: null,
    });
    expect(created.body.id).toMatch(/^key_/);

    const listed = await server.api.get("/v1/api-keys", accessToken);
    expect(listed.status).toBe(200);
    const record = listed.body.find((k: { id: string }) => k.id === created.body.id);
    expect(record).toEqual({
      id: created.body.id,
      name: "deploy bot",
      role: "agent",
      walletIds: null,
      expiresAt: null,
      createdAt: created.body.createdAt,
      lastUsed: null,
    });
    expect(listed.text).not.toContain(created.body.key);
    expect(listed.text).not.toContain(created.body.key.slice(4));
  });

  it("authenticates with the key and maintains lastUsed", async () => {
    const { apiKey, apiKeyId } = await seedAccount(server.api);
    const before = Date.now();
    expect((await server.api.get("/v1/wallets", apiKey)).status).toBe(200);
    const listed = await server.api.get("/v1/api-keys", apiKey);
    const record = listed.body.find((k: { id: string }) => k.id === apiKeyId);
    expect(record.lastUsed).not.toBeNull();
    expect(new Date(record.lastUsed).getTime()).toBeGreaterThanOrEqual(before - 1000);
  });

  it("revokes a key immediately and irreversibly", async () => {
    const { apiKey, apiKeyId, accessToken } = await seedAccount(server.api);
    expect((await server.api.get("/v1/wallets", apiKey)).status).toBe(200);
    const revoked = await server.api.delete(`/v1/api-keys/${apiKeyId}`, accessToken);
    expect(revoked.status).toBe(204);
    expect(revoked.text).toBe("");
    const after = await server.api.get("/v1/wallets", apiKey);
    expect(after.status).toBe(401);
    expect(expectErrorShape(after)).toMatchObject({ code: "Unauthorized", reason: "key_revoked" });
    // A repeated DELETE (a client's retry) answers as the first did, and the key stays revoked.
    const again = await server.api.delete(`/v1/api-keys/${apiKeyId}`, accessToken);
    expect(again.status).toBe(204);
    expect(again.text).toBe("");
    expect((await server.api.get("/v1/wallets", apiKey)).status).toBe(401);
    expect(
      (await server.api.get("/v1/api-keys", accessToken)).body.map((k: { id: string }) => k.id),
    ).not.toContain(apiKeyId);
  });

  it("a key revoked while a request of its was still sending its body acts for nothing: no key, endpoint or policy change", async () => {
    const owner = await seedAccount(server.api);
    const wallet = await server.api.post(
      "/v1/wallets",
      { name: "limited", chains: ["base"], policy: { maxPerTx: "5" } },
      owner.accessToken,
    );
    const stolen = await server.api.post("/v1/api-keys", { name: "ci", role: "admin" }, owner.accessToken);
    // Each request sends its headers and one byte of its body now (it is authenticated then), the rest later.
    const slow = [
      slowRequest(server.url, "POST", "/v1/api-keys", stolen.body.key, { name: "persist", role: "admin" }),
      slowRequest(server.url, "POST", "/v1/webhook-endpoints", stolen.body.key, {
        url: "https://hooks.example.com/x",
      }),
      slowRequest(server.url, "PATCH", `/v1/wallets/${wallet.body.id}/policy`, stolen.body.key, {
        maxPerTx: null,
      }),
    ];
    // Authenticated: the key's first use is on record.
    await eventually(async () => {
      const keys = (await server.api.get("/v1/api-keys", owner.accessToken)).body as any[];
      return keys.find((key) => key.id === stolen.body.id)?.lastUsed;
    });
    expect((await server.api.delete(`/v1/api-keys/${stolen.body.id}`, owner.accessToken)).status).toBe(204);

    for (const answer of await Promise.all(slow.map((request) => request.finish()))) {
      expect(answer.status, answer.text).toBe(401);
      expect(JSON.parse(answer.text).error.reason).toBe("key_revoked");
    }
    const keys = (await server.api.get("/v1/api-keys", owner.accessToken)).body as any[];
    expect(keys.map((key) => key.name)).not.toContain("persist");
    expect((await server.api.get("/v1/webhook-endpoints", owner.accessToken)).body.data).toEqual([]);
    const policy = await server.api.get(`/v1/wallets/${wallet.body.id}/policy`, owner.accessToken);
    expect(policy.body.maxPerTx).toBe("5");
  });

  it("rejects an unknown key, a key of the right shape that was never issued, and a bad name", async () => {
    const { accessToken } = await seedAccount(server.api);
    const unknown = await server.api.get("/v1/wallets", `svc_${"A".repeat(40)}`);
    expect(expectErrorShape(unknown)).toMatchObject({ code: "Unauthorized", reason: "invalid_credentials" });
    for (const body of [{}, { name: "" }, { name: "x".repeat(101) }, { name: 3 }]) {
      const response = await server.api.post("/v1/api-keys", body, accessToken);
      expect(response.status, JSON.stringify(body)).toBe(400);
    }
    const badId = await server.api.delete("/v1/api-keys/not-a-key-id", accessToken);
    expect(badId.status).toBe(400);
    const neverIssued = await server.api.delete(`/v1/api-keys/key_${"A".repeat(22)}`, accessToken);
    expect(neverIssued.status).toBe(404);
    expect(expectErrorShape(neverIssued).code).toBe("NotFound");
    // Another account's key, revoked or not, is absent for this one: revoking it twice is 404 both times.
    const other = await seedAccount(server.api);
    for (let i = 0; i < 2; i++) {
      expect((await server.api.delete(`/v1/api-keys/${other.apiKeyId}`, accessToken)).status).toBe(404);
    }
    expect((await server.api.get("/v1/wallets", other.apiKey)).status).toBe(200);
  });
});

describe.runIf(STORE_KIND === "postgres")("revocation across instances on one PostgreSQL", () => {
  it("a key revoked on one instance fails at once on another", async () => {
    const second = await createTestServer({ store: server.storeLocation });
    try {
      const { apiKey, apiKeyId, accessToken } = await seedAccount(server.api);
      expect((await second.api.get("/v1/wallets", apiKey)).status).toBe(200);
      expect((await server.api.delete(`/v1/api-keys/${apiKeyId}`, accessToken)).status).toBe(204);
      const onSecond = await second.api.get("/v1/wallets", apiKey);
      expect(onSecond.status).toBe(401);
      expect(expectErrorShape(onSecond).reason).toBe("key_revoked");
    } finally {
      await second.service.close();
    }
  });
});

describe.runIf(STORE_KIND === "postgres")(
  "a revocation or logout while the credential's spends keep coming",
  () => {
    /**
     * A spend being admitted holds its credential (`hold`) until released; meanwhile the revocation is asked,
     * then another spend comes. Returns what that later spend met, once the first has ended.
     */
    async function spendAfterWaitingEnd(hold: (tx: Tx) => Promise<void>, end: () => Promise<number>) {
      const db = server.service.store.db;
      const waitingForLocks = async () =>
        (
          await selectRows<{ n: number }>(
            db,
            sql`SELECT count(*)::int AS n FROM pg_stat_activity
              WHERE datname = current_database() AND wait_event_type = 'Lock'`,
          )
        )[0]?.n ?? 0;
      let release = () => {};
      const released = new Promise<void>((resolve) => {
        release = resolve;
      });
      let holding = () => {};
      const held = new Promise<void>((resolve) => {
        holding = resolve;
      });
      const first = db.transaction(async (tx) => {
        await hold(tx);
        holding();
        await released;
      });
      await held;
      const ending = end();
      await eventually(async () => (await waitingForLocks()) >= 1, { describe: "the revocation to wait" });
      let settled = false;
      const later = db
        .transaction(hold)
        .then(
          () => "admitted",
          (error: { reason?: string }) => error.reason ?? String(error),
        )
        .finally(() => {
          settled = true;
        });
      // Before: the later spend's share lock was granted beside the first one's, ahead of the waiting revocation.
      await eventually(async () => settled || (await waitingForLocks()) >= 2, {
        describe: "the later spend to queue or end",
      });
      release();
      await first;
      return { later: await later, ended: await ending };
    }

    it("a key's later spend waits for its revocation and is refused", async () => {
      const { apiKeyId, accessToken } = await seedAccount(server.api);
      const outcome = await spendAfterWaitingEnd(
        (tx) => ensureApiKeyLive(tx, apiKeyId, new Date(), { hold: true }),
        async () => (await server.api.delete(`/v1/api-keys/${apiKeyId}`, accessToken)).status,
      );
      expect(outcome).toEqual({ later: "key_revoked", ended: 204 });
    });

    it("a login's later spend waits for its logout and is refused", async () => {
      const { accessToken } = await seedAccount(server.api);
      const claims = JSON.parse(Buffer.from(accessToken.split(".")[1] as string, "base64url").toString()) as {
        sub: string;
        jti: string;
        exp: number;
      };
      const token = { accountId: claims.sub, tokenId: claims.jti, expiresAt: new Date(claims.exp * 1000) };
      const outcome = await spendAfterWaitingEnd(
        (tx) => ensureAccessTokenLive(tx, token, new Date(), { hold: true }),
        async () => (await server.api.post("/v1/auth/logout", undefined, accessToken)).status,
      );
      expect(outcome).toEqual({ later: "token_ended", ended: 204 });
    });
  },
);
