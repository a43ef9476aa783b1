import { fundEvm } from "@svc/devnet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { formatUsd, parseUnitsStrict, USD_DECIMALS } from "../src/internal/money.ts";
import { windowSpending } from "../src/policy/spend-window.ts";
import { admitSpend, failSpend } from "../src/spends/admission.ts";
import { findToken } from "../src/spends/transfer.ts";
import { devnetClients } from "./support/chains.ts";
import { openStoredKey } from "./support/keys.ts";
import {
  createTestServer,
  expectErrorShape,
  seedAccount,
  sharedDevnet,
  type TestServer,
} from "./support/test-server.ts";

let server: TestServer;

beforeAll(async () => {
  await sharedDevnet();
  // No confirmer passes after start-up: the spends recorded here are never broadcast.
  server = await createTestServer({ env: { SVC_CONFIRMER_INTERVAL_MS: "3600000" } });
});
afterAll(() => server.close());

const HOUR = 60 * 60 * 1000;
const PAYEE = "0x000000000000000000000000000000000000dEaD";

/**
 * A new account's base wallet with `dailyLimit`, funded, and `spend`: admits a USDC send worth `usdMicros`
 * made at `at` straight through the admission (signed with the wallet's next nonce, never broadcast).
 * `forget` wipes the key read for signing.
 */
async function walletAdmittingSpends(name: string, dailyLimit: string) {
  const devnet = await sharedDevnet();
  const { apiKey } = await seedAccount(server.api);
  const created = (
    await server.api.post("/v1/wallets", { name, chains: ["base"], policy: { dailyLimit } }, apiKey)
  ).body;
  await fundEvm(devnet, created.evm.address, { eth: 10n ** 18n, usdc: 100_000_000n });
  const { base } = await devnetClients(devnet);
  const usdc = findToken(base, "USDC");
  const privateKey = await openStoredKey(server.service, created.id, "evm");
  const plan = await base.planTransfer({ from: created.evm.address, to: PAYEE, token: usdc, amount: 1n });
  let nonce = 0;
  const spend = (usdMicros: bigint, at: Date) =>
    admitSpend(
      server.service.store.db,
      {
        walletId: created.id,
        type: "send",
        chain: "base",
        token: usdc,
        amount: usdMicros,
        from: created.evm.address,
        to: PAYEE,
        usdMicros,
      },
      { now: at, sign: () => base.signTransfer(plan, privateKey, nonce++) },
    );
  return { walletId: created.id as string, apiKey, spend, forget: () => privateKey.fill(0) };
}

describe("the rolling 24 h window", () => {
  it("counts exactly the spends of the last 24 h, across hour boundaries, and gives back failed ones", async () => {
    const wallet = await walletAdmittingSpends("window", "10");
    const db = server.service.store.db;
    const spend = (dollars: number, at: Date) => wallet.spend(BigInt(dollars) * 1_000_000n, at);
    // A moment 20 minutes into an hour, so the window starts inside an hour bucket.
    const now = new Date(Math.floor(Date.now() / HOUR) * HOUR - 40 * 60 * 1000);
    // Each spend fits the window as it stood when it was made.
    await spend(5, new Date(now.getTime() - 24 * HOUR - 60_000)); // just outside the window at `now`
    await spend(2, new Date(now.getTime() - 24 * HOUR + 60_000)); // just inside, in the partial first hour
    const failing = await spend(3, new Date(now.getTime() - 2 * HOUR));
    await spend(1, new Date(now.getTime() - 1000));

    // At `now`: 2 + 3 + 1 = 6 used.
    await expect(spend(5, now)).rejects.toThrow(
      "Daily limit of $10.00 exceeded: $6.00 used in the last 24h, this spend is $5.00",
    );
    // The spending view counts what the limit counts, hour by hour: the $2 in the window's first hour,
    // the $3 two hours back, the $1 in the last hour.
    const seen = await windowSpending(db, wallet.walletId, now);
    expect(seen.used).toBe(6_000_000n);
    expect(seen.hours).toHaveLength(24);
    expect(seen.hours.reduce((sum, hour) => sum + hour.usdMicros, 0n)).toBe(seen.used);
    expect(seen.hours.map((hour) => hour.usdMicros).filter((usd) => usd > 0n)).toEqual([
      2_000_000n,
      3_000_000n,
      1_000_000n,
    ]);
    expect(seen.hours[0]?.usdMicros).toBe(2_000_000n);
    expect(seen.hours[23]?.usdMicros).toBe(1_000_000n);
    // A failed spend gives its $3 back: 3 used, so $5 fits, then $3 more does not, and $2 does.
    await failSpend(db, failing.id, "test: never landed");
    await spend(5, now);
    await expect(spend(3, now)).rejects.toThrow(
      "Daily limit of $10.00 exceeded: $8.00 used in the last 24h, this spend is $3.00",
    );
    await spend(2, now);
    wallet.forget();
  });

  it("counts a spend made after the moment it is asked about in the last hour, as the limit counts it", async () => {
    // A reader takes the service's clock, then opens its snapshot; a spend committed in between was made after
    // the moment read. The limit counts it (CI on PostgreSQL once saw a total of 4.00 beside hours summing 3.00).
    const wallet = await walletAdmittingSpends("just after", "10");
    // 30 minutes into an hour, so the moment before and the spend fall in the same hour bucket.
    const madeAt = new Date(Math.floor(Date.now() / HOUR) * HOUR - 30 * 60 * 1000);
    await wallet.spend(4_000_000n, madeAt);
    wallet.forget();
    const seen = await windowSpending(
      server.service.store.db,
      wallet.walletId,
      new Date(madeAt.getTime() - 5),
    );
    expect(seen.used).toBe(4_000_000n);
    expect(seen.hours.map((hour) => hour.usdMicros)).toEqual([...Array(23).fill(0n), 4_000_000n]);
  });

  it("lets a spend made exactly on the hour leave the window exactly 24 h later, in the total as in the hours", async () => {
    const wallet = await walletAdmittingSpends("on the hour", "10");
    const db = server.service.store.db;
    const madeAt = new Date(Math.floor(Date.now() / HOUR) * HOUR - 25 * HOUR);
    const leavesAt = new Date(madeAt.getTime() + 24 * HOUR);
    await wallet.spend(4_000_000n, madeAt);

    const justBefore = await windowSpending(db, wallet.walletId, new Date(leavesAt.getTime() - 1));
    expect(justBefore.used).toBe(4_000_000n);
    expect(justBefore.hours[0]?.usdMicros).toBe(4_000_000n);
    // The window is the 24 h after `leavesAt - 24 h`, the moment the spend was made: it is out, in both views.
    const atLeaving = await windowSpending(db, wallet.walletId, leavesAt);
    expect(atLeaving.used).toBe(0n);
    expect(atLeaving.hours.map((hour) => hour.usdMicros)).toEqual(Array(24).fill(0n));
    // And the limit agrees: the whole $10 fits again at that moment.
    await wallet.spend(10_000_000n, leavesAt);
    wallet.forget();
  });

  it("gives a spend's share back 24 h after it was made, by the service's clock, through the API", async () => {
    const devnet = await sharedDevnet();
    const { apiKey } = await seedAccount(server.api);
    const wallet = (
      await server.api.post(
        "/v1/wallets",
        { name: "a day later", chains: ["base"], policy: { dailyLimit: "10" } },
        apiKey,
      )
    ).body;
    await fundEvm(devnet, wallet.evm.address, { eth: 10n ** 18n, usdc: 100_000_000n });
    const send = (amount: string) =>
      server.api.post(`/v1/wallets/${wallet.id}/send`, { to: PAYEE, amount, chain: "base" }, apiKey);
    expect((await send("6")).status).toBe(201);
    const refused = await send("5");
    expect(refused.status).toBe(403);
    const { resetsAt } = expectErrorShape(refused).details as { resetsAt: string };
    try {
      // A minute before the $6 leaves the window it still counts; a second after, it does not.
      server.clock.jumpTo(new Date(Date.parse(resetsAt) - 60_000));
      const stillRefused = await send("5");
      expect(expectErrorShape(stillRefused)).toMatchObject({
        reason: "daily_limit",
        details: { used: "6.00", resetsAt },
      });
      server.clock.jumpTo(new Date(Date.parse(resetsAt) + 1000));
      const admitted = await send("5");
      expect(admitted.status, admitted.text).toBe(201);
    } finally {
      server.clock.reset();
    }
  });

  it("GET /v1/wallets/:id/spending answers a total that is the sum of its hours while spends are admitted", async () => {
    const wallet = await walletAdmittingSpends("busy window", "1000000");
    const { apiKey } = wallet;
    let admitting = true;
    const admitter = (async () => {
      try {
        for (let i = 0; i < 60; i++) await wallet.spend(1_000_000n, new Date());
      } finally {
        admitting = false;
      }
    })();
    const disagreements: string[] = [];
    let reads = 0;
    while (admitting || reads === 0) {
      const view = await server.api.get(`/v1/wallets/${wallet.walletId}/spending`, apiKey);
      expect(view.status).toBe(200);
      reads++;
      const micros = (usd: string) => parseUnitsStrict(usd, USD_DECIMALS) ?? -1n;
      const hoursSum = view.body.hours.reduce(
        (sum: bigint, hour: { usd: string }) => sum + micros(hour.usd),
        0n,
      );
      if (hoursSum !== micros(view.body.used))
        disagreements.push(`${view.body.used} vs ${formatUsd(hoursSum)}`);
    }
    await admitter;
    wallet.forget();
    expect(disagreements).toEqual([]);
    expect((await server.api.get(`/v1/wallets/${wallet.walletId}/spending`, apiKey)).body.used).toBe("60.00");
  });

  it("GET /v1/wallets/:id/spending shows the limit's own figures, by hour, to every credential of the wallet", async () => {
    const devnet = await sharedDevnet();
    const { apiKey } = await seedAccount(server.api);
    const create = (name: string) =>
      server.api.post("/v1/wallets", { name, chains: ["base"], policy: { dailyLimit: "10" } }, apiKey);
    const wallet = (await create("spending")).body;
    const other = (await create("other")).body;
    await fundEvm(devnet, wallet.evm.address, { eth: 10n ** 18n, usdc: 100_000_000n });
    const spending = (key = apiKey, id = wallet.id) => server.api.get(`/v1/wallets/${id}/spending`, key);

    const empty = await spending();
    expect(empty.status).toBe(200);
    expect(empty.body).toMatchObject({
      walletId: wallet.id,
      dailyLimit: "10.00",
      used: "0.00",
      remaining: "10.00",
    });
    expect(empty.body.hours).toHaveLength(24);

    const sent = await server.api.post(
      `/v1/wallets/${wallet.id}/send`,
      { to: PAYEE, amount: "6.5", chain: "base" },
      apiKey,
    );
    expect(sent.status, sent.text).toBe(201);
    const after = (await spending()).body;
    expect(after).toMatchObject({ used: "6.50", remaining: "3.50" });
    expect(after.hours.at(-1).usd).toBe("6.50");
    expect(after.hours.slice(0, 23).every((hour: { usd: string }) => hour.usd === "0.00")).toBe(true);
    // The refusal of the next spend quotes the same figure.
    const refused = await server.api.post(
      `/v1/wallets/${wallet.id}/send`,
      { to: PAYEE, amount: "5", chain: "base" },
      apiKey,
    );
    expect(expectErrorShape(refused).details).toMatchObject({ used: after.used, resetsAt: after.resetsAt });

    // A read key of this wallet sees it; a key bound to another wallet does not learn it exists.
    const key = async (role: string, walletIds: string[]) =>
      (await server.api.post("/v1/api-keys", { name: role, role, walletIds }, apiKey)).body.key as string;
    expect((await spending(await key("read", [wallet.id]))).body.used).toBe("6.50");
    const stranger = await spending(await key("agent", [other.id]));
    expect(stranger.status).toBe(404);
    expect(expectErrorShape(stranger).code).toBe("NotFound");
  });
});
