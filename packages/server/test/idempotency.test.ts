import { fundEvm } from "@svc/devnet";
import { and, eq, sql } from "drizzle-orm";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  attachTransaction,
  type ClaimOutcome,
  claimIdempotencyKey,
  finishIdempotencyClaim,
  type IdempotencyClaim,
  requestFingerprint,
  sweepIdempotencyKeys,
} from "../src/idempotency/idempotency.ts";
import { idempotencyKeys } from "../src/internal/db/schema.ts";
import { selectRows, type Tx } from "../src/internal/db/store.ts";
import { eventually } from "./support/eventually.ts";
import {
  createTestServer,
  expectErrorShape,
  STORE_KIND,
  seedAccount,
  sharedDevnet,
  type TestServer,
} from "./support/test-server.ts";

let server: TestServer;
let owner: Awaited<ReturnType<typeof seedAccount>>;
const USDC = 1_000_000n;
const RECIPIENT = "0x1111111111111111111111111111111111111111";

beforeAll(async () => {
  server = await createTestServer();
  owner = await seedAccount(server.api);
});
afterAll(() => server.close());
// Each test starts at the real time; a test that moves the service's clock leaves it there.
afterEach(() => server.clock.reset());

/** How old an in-progress claim must be before a retry takes it over (idempotency.ts, STALE_CLAIM_MS). */
const STALE_AFTER_MS = 60_000;

async function createWallet(policy: Record<string, unknown> = {}) {
  const response = await server.api.post(
    "/v1/wallets",
    { name: "w", chains: ["base"], policy },
    owner.apiKey,
  );
  if (response.status !== 201) throw new Error(response.text);
  return response.body as { id: string; evm: { address: `0x${string}` } };
}

const sendWithKey = (walletId: string, key: string, body: Record<string, unknown>) =>
  server.api.post(`/v1/wallets/${walletId}/send`, { chain: "base", ...body }, owner.apiKey, {
    "idempotency-key": key,
  });

/** How the service stores an Idempotency-Key sent by a credential for every wallet (the owner's key). */
const accountWide = (key: string) => `:${key}`;

/** Leaves a claim as a request still running (or a dead process) would: in progress, nothing recorded. */
async function leaveClaim(walletId: string, key: string, body: Record<string, unknown>, lockedAt: Date) {
  await server.service.store.db.insert(idempotencyKeys).values({
    accountId: owner.userId,
    key: accountWide(key),
    // The fingerprint the route computes: its params and its parsed body (token defaults to USDC).
    requestHash: requestFingerprint("POST", "/v1/wallets/:id/send", {
      params: { id: walletId },
      body: { chain: "base", token: "USDC", ...body },
    }),
    state: "in_progress",
    lockedAt,
  });
}

const sendsOf = async (walletId: string) =>
  (await server.api.get(`/v1/wallets/${walletId}/transactions?type=send`, owner.apiKey)).body.total;

describe("a refusal that moved nothing is not remembered under its Idempotency-Key", () => {
  it("a send refused for missing gas, then funded, then retried with the same key, is sent", async () => {
    const wallet = await createWallet();
    const devnet = await sharedDevnet();
    await fundEvm(devnet, wallet.evm.address, { usdc: 10n * USDC });
    const body = { to: RECIPIENT, amount: "1" };
    const refused = await sendWithKey(wallet.id, "invoice-7", body);
    expect(refused.status).toBe(422);
    expect(expectErrorShape(refused).reason).toBe("insufficient_gas");
    await fundEvm(devnet, wallet.evm.address, { eth: 10n ** 18n });
    const retried = await sendWithKey(wallet.id, "invoice-7", body);
    expect(retried.status).toBe(201);
    expect(retried.headers.get("idempotent-replayed")).toBe("false");
    const replayed = await sendWithKey(wallet.id, "invoice-7", body);
    expect(replayed.status).toBe(201);
    expect(replayed.headers.get("idempotent-replayed")).toBe("true");
    expect(replayed.body).toEqual(retried.body);
    expect(await sendsOf(wallet.id)).toBe(1);
  });

  it("a send refused by the policy is evaluated afresh once the owner changes the policy", async () => {
    const wallet = await createWallet({ maxPerTx: "1" });
    await fundEvm(await sharedDevnet(), wallet.evm.address, { eth: 10n ** 18n, usdc: 10n * USDC });
    const body = { to: RECIPIENT, amount: "2" };
    const refused = await sendWithKey(wallet.id, "po-1", body);
    expect(expectErrorShape(refused).reason).toBe("max_per_tx");
    expect(refused.headers.get("idempotent-replayed")).toBe("false");
    await server.api.request("PATCH", `/v1/wallets/${wallet.id}/policy`, {
      token: owner.apiKey,
      body: { maxPerTx: "5" },
    });
    expect((await sendWithKey(wallet.id, "po-1", body)).status).toBe(201);
    expect(await sendsOf(wallet.id)).toBe(1);
  });
});

describe("finished keys past their 24 h", () => {
  it("are swept, in-progress and younger ones kept; a key swept is free again", async () => {
    const wallet = await createWallet();
    await fundEvm(await sharedDevnet(), wallet.evm.address, { eth: 10n ** 18n, usdc: 10n * USDC });
    const key = `sweep-${wallet.id}`;
    const sent = await sendWithKey(wallet.id, key, { to: RECIPIENT, amount: "1" });
    expect(sent.status, sent.text).toBe(201);
    await leaveClaim(wallet.id, `${key}-running`, { to: RECIPIENT, amount: "2" }, new Date());
    const rows = async () =>
      (
        await server.service.store.db
          .select({ key: idempotencyKeys.key })
          .from(idempotencyKeys)
          .where(eq(idempotencyKeys.accountId, owner.userId))
      )
        .map((row) => row.key)
        .filter((stored) => stored.startsWith(accountWide(key)));
    const db = server.service.store.db;
    expect(await sweepIdempotencyKeys(db, new Date(Date.now() + 23 * 3_600_000))).toBe(0);
    expect((await rows()).sort()).toEqual([accountWide(key), accountWide(`${key}-running`)]);

    const swept = await sweepIdempotencyKeys(db, new Date(Date.now() + 25 * 3_600_000));
    expect(swept).toBeGreaterThanOrEqual(1);
    expect(await rows()).toEqual([accountWide(`${key}-running`)]);
    // Free again: the same key is a new request.
    const again = await sendWithKey(wallet.id, key, { to: RECIPIENT, amount: "1" });
    expect(again.status, again.text).toBe(201);
    expect(again.headers.get("idempotent-replayed")).toBe("false");
    expect(again.body.id).not.toBe(sent.body.id);
  });
});

describe("a claim left behind by a process that died", () => {
  it("is taken over once stale: resumed from the spend it had recorded, never sent again", async () => {
    const wallet = await createWallet();
    await fundEvm(await sharedDevnet(), wallet.evm.address, { eth: 10n ** 18n, usdc: 10n * USDC });
    const body = { to: RECIPIENT, amount: "1" };
    const first = await sendWithKey(wallet.id, "crash-1", body);
    expect(first.status).toBe(201);
    // What a crash between recording the spend and storing the response leaves: the claim in progress,
    // linked to its spend. Then a minute and a second pass on the service's clock.
    await server.service.store.db
      .update(idempotencyKeys)
      .set({ state: "in_progress", responseStatus: null, responseBody: null })
      .where(eq(idempotencyKeys.key, accountWide("crash-1")));
    server.clock.advance(STALE_AFTER_MS + 1000);
    const retried = await sendWithKey(wallet.id, "crash-1", body);
    expect(retried.status).toBe(201);
    expect(retried.body.id).toBe(first.body.id);
    expect(await sendsOf(wallet.id)).toBe(1);
    const replayed = await sendWithKey(wallet.id, "crash-1", body);
    expect(replayed.headers.get("idempotent-replayed")).toBe("true");
    expect(replayed.body.id).toBe(first.body.id);
  });

  it("is taken over once stale and run afresh when it had recorded nothing", async () => {
    const wallet = await createWallet();
    await fundEvm(await sharedDevnet(), wallet.evm.address, { eth: 10n ** 18n, usdc: 10n * USDC });
    const body = { to: RECIPIENT, amount: "1" };
    await leaveClaim(wallet.id, "crash-2", body, server.clock.now());
    server.clock.advance(STALE_AFTER_MS + 1000);
    const retried = await sendWithKey(wallet.id, "crash-2", body);
    expect(retried.status).toBe(201);
    expect(await sendsOf(wallet.id)).toBe(1);
  });

  it("is not taken over while fresh: a duplicate waits, then answers idempotency_key_in_use", async () => {
    const wallet = await createWallet();
    await fundEvm(await sharedDevnet(), wallet.evm.address, { eth: 10n ** 18n, usdc: 10n * USDC });
    const body = { to: RECIPIENT, amount: "1" };
    // Half a minute old on the service's clock: fresh for all the 10 s the duplicate waits.
    await leaveClaim(wallet.id, "fresh-1", body, server.clock.now());
    server.clock.advance(STALE_AFTER_MS / 2);
    const duplicate = await sendWithKey(wallet.id, "fresh-1", body);
    expect(duplicate.status).toBe(409);
    expect(expectErrorShape(duplicate).reason).toBe("idempotency_key_in_use");
    expect(await sendsOf(wallet.id)).toBe(0);
  });
});

describe.runIf(STORE_KIND === "postgres")("a stale claim taken over as its first request finishes", () => {
  /**
   * Runs `finish` (the first request's last write to its claim) between a retry's read of the stale claim
   * and its take-over: the claim's row is locked until the take-over waits on it, and `finish` commits
   * under that lock. What the retry makes of it is returned.
   */
  async function takeOverDuring(key: string, finish: (tx: Tx, claim: IdempotencyClaim) => Promise<void>) {
    const db = server.service.store.db;
    const fingerprint = "f".repeat(64);
    const claim: IdempotencyClaim = { accountId: owner.userId, key, lockedAt: server.clock.now() };
    await db.insert(idempotencyKeys).values({ ...claim, requestHash: fingerprint, state: "in_progress" });
    server.clock.advance(STALE_AFTER_MS + 1000);
    let retry: Promise<ClaimOutcome> | undefined;
    await db.transaction(async (tx) => {
      await tx
        .select()
        .from(idempotencyKeys)
        .where(and(eq(idempotencyKeys.accountId, claim.accountId), eq(idempotencyKeys.key, key)))
        .for("update");
      retry = claimIdempotencyKey(db, { accountId: owner.userId, key, fingerprint }, server.clock.now);
      await eventually(async () => {
        const waiting = await selectRows<{ query: string }>(
          db,
          sql`SELECT query FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query ILIKE 'update "idempotency_keys"%'`,
        );
        return waiting.length > 0 ? true : undefined;
      });
      await finish(tx, claim);
    });
    return (retry as Promise<ClaimOutcome>).catch((error: unknown) => error);
  }

  it("resumes from the spend the first request recorded meanwhile, never running it afresh", async () => {
    const outcome = await takeOverDuring(":race-attach", (tx, claim) =>
      attachTransaction(tx, claim, "tx_recorded"),
    );
    expect(outcome).toMatchObject({ kind: "resume", transactionId: "tx_recorded" });
  });

  it("replays the response the first request stored meanwhile", async () => {
    const outcome = await takeOverDuring(":race-finish", async (tx, claim) => {
      await attachTransaction(tx, claim, "tx_finished");
      await finishIdempotencyClaim(tx, claim, { status: 201, body: { id: "tx_finished" } });
    });
    expect(outcome).toMatchObject({ kind: "replay", response: { status: 201, body: { id: "tx_finished" } } });
  });
});

describe("keys limited to some wallets", () => {
  const agentKeyFor = async (walletId: string) => {
    const created = await server.api.post(
      "/v1/api-keys",
      { name: `agent of ${walletId}`, role: "agent", walletIds: [walletId] },
      owner.apiKey,
    );
    if (created.status !== 201) throw new Error(created.text);
    return created.body.key as string;
  };

  it("have Idempotency-Keys of their own: another wallet's agent neither learns nor blocks them", async () => {
    const devnet = await sharedDevnet();
    const [mine, theirs] = [await createWallet(), await createWallet()];
    for (const wallet of [mine, theirs])
      await fundEvm(devnet, wallet.evm.address, { eth: 10n ** 18n, usdc: 10n * USDC });
    const [myKey, theirKey] = [await agentKeyFor(mine.id), await agentKeyFor(theirs.id)];
    const sendAs = (apiKey: string, walletId: string) =>
      server.api.post(`/v1/wallets/${walletId}/send`, { chain: "base", to: RECIPIENT, amount: "1" }, apiKey, {
        "idempotency-key": "payroll-2026-11",
      });

    expect((await sendAs(theirKey, theirs.id)).status).toBe(201);
    // The same key on my own wallet is mine to use: sent, not idempotency_key_reused.
    const sent = await sendAs(myKey, mine.id);
    expect(sent.status, sent.text).toBe(201);
    expect(sent.headers.get("idempotent-replayed")).toBe("false");
    expect(await sendsOf(mine.id)).toBe(1);
    expect(await sendsOf(theirs.id)).toBe(1);
  });

  it("cannot be reached by a credential for every wallet that writes the bound key's id into its header", async () => {
    const devnet = await sharedDevnet();
    const wallet = await createWallet();
    await fundEvm(devnet, wallet.evm.address, { eth: 10n ** 18n, usdc: 10n * USDC });
    const created = await server.api.post(
      "/v1/api-keys",
      { name: "bound agent", role: "agent", walletIds: [wallet.id] },
      owner.apiKey,
    );
    const unbound = await server.api.post(
      "/v1/api-keys",
      { name: "unbound agent", role: "agent" },
      owner.apiKey,
    );
    const body = { chain: "base", to: RECIPIENT, amount: "1" };
    const send = (apiKey: string, key: string) =>
      server.api.post(`/v1/wallets/${wallet.id}/send`, body, apiKey, { "idempotency-key": key });

    // Taken first under the bound key's id, by the key for every wallet...
    const forged = await send(unbound.body.key, `${created.body.id}:inv-1`);
    expect(forged.status, forged.text).toBe(201);
    // ...the bound key's own inv-1 is still its own: sent afresh, not the other's answer replayed.
    const own = await send(created.body.key, "inv-1");
    expect(own.status, own.text).toBe(201);
    expect(own.headers.get("idempotent-replayed")).toBe("false");
    expect(own.body.id).not.toBe(forged.body.id);
    // And the other way: the bound key's inv-2 used first tells the key for every wallet nothing.
    expect((await send(created.body.key, "inv-2")).status).toBe(201);
    const probe = await send(unbound.body.key, `${created.body.id}:inv-2`);
    expect(probe.headers.get("idempotent-replayed")).toBe("false");
    expect(await sendsOf(wallet.id)).toBe(4);
  });
});
