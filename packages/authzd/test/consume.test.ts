/**
 * Consuming a decision (the wallet service's `POST /spend/consume`) and giving it back
 * (`POST /spend/release`): a security review found that an agent could cancel a decision after the
 * service had spent it, getting the credits back for a payment that was made. A consumed decision can no
 * longer be cancelled by its payer; it is settled as usual, or released by the service that consumed it
 * when the spend was refused before anything was signed. All of it is on the audit chain and survives a
 * restart.
 */
import fs from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { writeAnchorSync } from "../src/audit/anchor.ts";
import { type AuditRow, encodeRow } from "../src/audit/rows.ts";
import { homePaths } from "../src/internal/home.ts";
import { runCli, SPEND, startTestDaemon, type TestDaemon } from "./harness.ts";

interface Verdict {
  approved: boolean;
  decision_id: string;
}

type Body = Record<string, unknown> & {
  code?: string;
  error?: string;
  state?: string;
  decision?: Record<string, unknown>;
};

interface Budget {
  reserved_credits: number;
  settled_credits: number;
  expired_unsettled_credits: number;
  available_credits: number;
}

const SPENDER = ["wallet.spend.authorize", "wallet.spend.settle"];
const UNKNOWN_ID = `dec_${"0".repeat(32)}`;

/** Helpers bound to one daemon. */
function client(daemon: TestDaemon) {
  const post = (path: string, token: string, body: unknown) =>
    daemon.call<Body>("POST", path, { token, body });
  return {
    authorize: async (token: string, overrides: Record<string, unknown> = {}) => {
      const reply = await daemon.call<Verdict>("POST", "/spend/authorize", {
        token,
        body: { ...SPEND, ...overrides },
      });
      expect(reply.status).toBe(200);
      return reply.body;
    },
    consume: (token: string, decisionId: string) =>
      post("/spend/consume", token, { decision_id: decisionId }),
    release: (token: string, decisionId: string) =>
      post("/spend/release", token, { decision_id: decisionId }),
    cancel: (token: string, decisionId: string) => post("/spend/cancel", token, { decision_id: decisionId }),
    settle: (token: string, decisionId: string, credits: number = SPEND.credits) =>
      post("/spend/settle", token, {
        decision_id: decisionId,
        provider: SPEND.provider,
        network: SPEND.network,
        asset: SPEND.asset,
        amount: SPEND.amount,
        credits,
        tx_sig: "0x5e1f",
      }),
    lookup: (token: string, decisionId: string) =>
      daemon.call<Body>("GET", `/spend/decisions/${decisionId}`, { token }),
    budget: async (name: string) =>
      (await daemon.call<Budget>("GET", `/budgets/${name}`, { token: daemon.operatorToken })).body,
  };
}

describe("consume and release (long reservations)", () => {
  let daemon: TestDaemon;
  let payer: string;
  let verifier: string;
  let otherVerifier: string;

  beforeAll(async () => {
    // The race below sends 40 requests at once per identity; the limiter is not what is tested here.
    daemon = await startTestDaemon({ AUTHZD_SPEND_RATE_LIMIT_PER_SECOND: "0" });
    payer = await daemon.identity("payer", SPENDER, { budgetCredits: 1000 });
    verifier = await daemon.identity("wallet-service", ["wallet.spend.verify"]);
    otherVerifier = await daemon.identity("other-service", ["wallet.spend.verify"]);
  });

  afterAll(async () => {
    await daemon.stop({ removeHome: true });
  });

  it("answers the decision's facts, now consumed, and chains a spend_consumed row naming the consumer", async () => {
    const { authorize, consume, lookup } = client(daemon);
    const verdict = await authorize(payer, { credits: 2 });
    const consumed = await consume(verifier, verdict.decision_id);
    expect(consumed.status).toBe(200);
    const decided = daemon.auditRows().find((r) => r.decision_id === verdict.decision_id) as { time: string };
    const row = daemon
      .auditRows()
      .find((r) => r.kind === "spend_consumed" && r.decision_id === verdict.decision_id) as { time: string };
    expect(row).toMatchObject({ payer: "payer", consumer: "wallet-service" });
    expect(consumed.body).toEqual({
      kind: "spend_consumed",
      decision_id: verdict.decision_id,
      payer: "payer",
      approved: true,
      provider: SPEND.provider,
      network: SPEND.network,
      asset: SPEND.asset,
      amount: SPEND.amount,
      per_call_cap: SPEND.per_call_cap,
      credits: 2,
      destination: SPEND.destination,
      decided_at: decided.time,
      expires_at: new Date(Date.parse(decided.time) + 600_000).toISOString(),
      consumed_at: row.time,
      state: "consumed",
    });
    expect((await lookup(verifier, verdict.decision_id)).body).toMatchObject({
      kind: "spend_decision",
      state: "consumed",
      consumed_at: row.time,
    });
  });

  it("refuses the payer's cancel of a consumed decision (409 decision_consumed), keeps its credits reserved, and still settles it", async () => {
    const { authorize, consume, cancel, settle, budget, release } = client(daemon);
    const before = await budget("payer");
    const verdict = await authorize(payer, { credits: 2 });
    expect((await consume(verifier, verdict.decision_id)).status).toBe(200);
    const rowsBefore = daemon.auditRows().length;
    const refused = await cancel(payer, verdict.decision_id);
    expect(refused.status).toBe(409);
    expect(refused.body.code).toBe("decision_consumed");
    expect(refused.body.error).toContain("can no longer be cancelled");
    expect(daemon.auditRows().length).toBe(rowsBefore);
    expect((await budget("payer")).available_credits).toBe(before.available_credits - 2);

    const settled = await settle(payer, verdict.decision_id, 2);
    expect(settled.status).toBe(200);
    expect(settled.body.kind).toBe("spend_settled");
    expect(await budget("payer")).toMatchObject({
      settled_credits: before.settled_credits + 2,
      available_credits: before.available_credits - 2,
    });
    // Settled: neither the payer nor the consumer can take it back.
    expect((await cancel(payer, verdict.decision_id)).body.code).toBe("already_settled");
    expect((await release(verifier, verdict.decision_id)).body.code).toBe("already_settled");
  });

  it("consumes a decision once: a second consume, by the same or another verifier, is 409 decision_consumed with the decision", async () => {
    const { authorize, consume } = client(daemon);
    const verdict = await authorize(payer);
    expect((await consume(verifier, verdict.decision_id)).status).toBe(200);
    for (const token of [verifier, otherVerifier]) {
      const again = await consume(token, verdict.decision_id);
      expect(again.status).toBe(409);
      expect(again.body).toMatchObject({
        code: "decision_consumed",
        decision: { decision_id: verdict.decision_id, state: "consumed" },
      });
    }
    expect(
      daemon.auditRows().filter((r) => r.kind === "spend_consumed" && r.decision_id === verdict.decision_id),
    ).toHaveLength(1);
  });

  it("refuses to consume a denied, cancelled or settled decision (409 naming why), an unknown or malformed one (404), and without wallet.spend.verify (403), writing no row", async () => {
    const { authorize, consume, cancel, settle } = client(daemon);
    const denied = await authorize(payer, { amount: "9000" });
    expect(denied.approved).toBe(false);
    const cancelled = await authorize(payer);
    expect((await cancel(payer, cancelled.decision_id)).status).toBe(200);
    const settled = await authorize(payer);
    expect((await settle(payer, settled.decision_id)).status).toBe(200);
    const approved = await authorize(payer);
    const rowsBefore = daemon.auditRows().length;

    for (const [id, code, state] of [
      [denied.decision_id, "decision_denied", "denied"],
      [cancelled.decision_id, "decision_cancelled", "cancelled"],
      [settled.decision_id, "already_settled", "settled"],
    ] as const) {
      const reply = await consume(verifier, id);
      expect(reply.status, code).toBe(409);
      expect(reply.body).toMatchObject({ code, decision: { decision_id: id, state } });
    }
    expect((await consume(verifier, denied.decision_id)).body.error).toContain(
      "amount 9000 exceeds per_call_cap 5000",
    );
    for (const id of [UNKNOWN_ID, "dec_totally_made_up", ""]) {
      const reply = await consume(verifier, id);
      expect(reply.status, id).toBe(404);
      expect(reply.body.code).toBe("decision_not_found");
    }
    const malformed = await daemon.call<Body>("POST", "/spend/consume", {
      token: verifier,
      body: { decision_id: approved.decision_id, amount: "1" },
    });
    expect(malformed.status).toBe(400);
    expect(malformed.body.code).toBe("invalid_body");
    const forbidden = await consume(payer, approved.decision_id);
    expect(forbidden.status).toBe(403);
    expect(forbidden.body.code).toBe("missing_capability");
    expect(daemon.auditRows().length).toBe(rowsBefore);
  });

  it("release by the consumer frees the credits and ends the decision: no settle, cancel or second consume; a repeat answers the same", async () => {
    const { authorize, consume, release, cancel, settle, lookup, budget } = client(daemon);
    const before = await budget("payer");
    const verdict = await authorize(payer, { credits: 3 });
    expect((await consume(verifier, verdict.decision_id)).status).toBe(200);
    expect((await budget("payer")).available_credits).toBe(before.available_credits - 3);

    const released = await release(verifier, verdict.decision_id);
    expect(released.status).toBe(200);
    expect(released.body).toMatchObject({ kind: "spend_released", decision_id: verdict.decision_id });
    expect(typeof released.body.released_at).toBe("string");
    expect(await budget("payer")).toEqual(before);
    const row = daemon
      .auditRows()
      .find((r) => r.kind === "spend_released" && r.decision_id === verdict.decision_id);
    expect(row).toMatchObject({ payer: "payer", consumer: "wallet-service" });
    expect((await lookup(verifier, verdict.decision_id)).body.state).toBe("released");

    expect(await release(verifier, verdict.decision_id)).toMatchObject({ status: 200, body: released.body });
    expect((await settle(payer, verdict.decision_id, 3)).body.code).toBe("decision_released");
    expect((await cancel(payer, verdict.decision_id)).body.code).toBe("decision_released");
    expect((await consume(verifier, verdict.decision_id)).body.code).toBe("decision_released");
    expect(
      daemon.auditRows().filter((r) => r.kind === "spend_released" && r.decision_id === verdict.decision_id),
    ).toHaveLength(1);
    expect(await budget("payer")).toEqual(before);
  });

  it("lets only the consumer release: another verifier, or a decision nobody consumed, is 409 not_consumed_by_caller; an unknown one 404", async () => {
    const { authorize, consume, release } = client(daemon);
    const consumed = await authorize(payer);
    expect((await consume(verifier, consumed.decision_id)).status).toBe(200);
    const unconsumed = await authorize(payer);
    const rowsBefore = daemon.auditRows().length;
    for (const [token, id] of [
      [otherVerifier, consumed.decision_id],
      [verifier, unconsumed.decision_id],
    ] as const) {
      const reply = await release(token, id);
      expect(reply.status).toBe(409);
      expect(reply.body.code).toBe("not_consumed_by_caller");
    }
    expect((await release(verifier, UNKNOWN_ID)).status).toBe(404);
    expect((await release(payer, consumed.decision_id)).body.code).toBe("missing_capability");
    expect(daemon.auditRows().length).toBe(rowsBefore);
  });

  it("refuses to consume an approval whose payer has since lost wallet.spend.authorize (409 payer_not_authorized), writing no row", async () => {
    const { authorize, consume, lookup } = client(daemon);
    const cutOff = await daemon.identity("cut-off", SPENDER, { budgetCredits: 100 });
    const made = [await authorize(cutOff), await authorize(cutOff)];
    expect((await consume(verifier, made[0]?.decision_id as string)).status).toBe(200);
    const revoke = await daemon.call("POST", "/capabilities/revoke", {
      token: daemon.operatorToken,
      body: { identity: "cut-off", capability: "wallet.spend.authorize" },
    });
    expect(revoke.status).toBe(200);
    const rowsBefore = daemon.auditRows().length;
    const refused = await consume(verifier, made[1]?.decision_id as string);
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({
      code: "payer_not_authorized",
      decision: { decision_id: made[1]?.decision_id, state: "approved" },
    });
    expect(daemon.auditRows()).toHaveLength(rowsBefore);
    expect((await lookup(verifier, made[1]?.decision_id as string)).body).toMatchObject({
      state: "approved",
    });
  });

  it("of a concurrent cancel and consume of one decision exactly one wins, 20 times over", async () => {
    const { authorize, consume, cancel, lookup } = client(daemon);
    const outcomes = { consumed: 0, cancelled: 0 };
    for (let i = 0; i < 20; i++) {
      const verdict = await authorize(payer);
      const [consumed, cancelled] = await Promise.all([
        consume(verifier, verdict.decision_id),
        cancel(payer, verdict.decision_id),
      ]);
      const statuses = [consumed.status, cancelled.status].sort();
      expect(statuses, JSON.stringify([consumed.body, cancelled.body])).toEqual([200, 409]);
      const state = (await lookup(verifier, verdict.decision_id)).body.state;
      if (consumed.status === 200) {
        expect(cancelled.body.code).toBe("decision_consumed");
        expect(state).toBe("consumed");
        outcomes.consumed++;
      } else {
        expect(consumed.body.code).toBe("decision_cancelled");
        expect(state).toBe("cancelled");
        outcomes.cancelled++;
      }
    }
    expect(outcomes.consumed + outcomes.cancelled).toBe(20);
  });

  it("keeps consumption and release after a restart: the payer still cannot cancel, the budget is rebuilt exactly", async () => {
    const { authorize, consume, release, cancel, lookup, budget } = client(daemon);
    const kept = await authorize(payer, { credits: 4 });
    expect((await consume(verifier, kept.decision_id)).status).toBe(200);
    const given = await authorize(payer, { credits: 5 });
    expect((await consume(verifier, given.decision_id)).status).toBe(200);
    expect((await release(verifier, given.decision_id)).status).toBe(200);
    const budgetBefore = await budget("payer");
    const viewsBefore = await Promise.all([kept, given].map((v) => lookup(verifier, v.decision_id)));

    // The helpers read daemon.url on every call, so they follow the restarted daemon.
    await daemon.restart();

    expect(await budget("payer")).toEqual(budgetBefore);
    const viewsAfter = await Promise.all([kept, given].map((v) => lookup(verifier, v.decision_id)));
    expect(viewsAfter.map((r) => r.body)).toEqual(viewsBefore.map((r) => r.body));
    expect(viewsAfter.map((r) => r.body.state)).toEqual(["consumed", "released"]);
    const refused = await cancel(payer, kept.decision_id);
    expect(refused.status).toBe(409);
    expect(refused.body.code).toBe("decision_consumed");
    expect((await consume(verifier, kept.decision_id)).body.code).toBe("decision_consumed");
    expect((await cancel(payer, given.decision_id)).body.code).toBe("decision_released");
    const verified = await runCli(["audit", "verify"], daemon.home);
    expect(verified.code, verified.stderr).toBe(0);
  });
});

describe("a consumed decision whose reservation lapses unsettled (short reservations)", () => {
  let daemon: TestDaemon;
  let payer: string;
  let verifier: string;

  beforeAll(async () => {
    daemon = await startTestDaemon({ AUTHZD_RESERVATION_TTL_SECONDS: "1" }, { clockOffsetMs: 0 });
    payer = await daemon.identity("payer", SPENDER, { budgetCredits: 5 });
    verifier = await daemon.identity("wallet-service", ["wallet.spend.verify"]);
  });

  afterAll(async () => {
    await daemon.stop({ removeHome: true });
  });

  it("keeps counting its credits (fail closed), cannot be cancelled by the payer, and cannot be consumed once lapsed", async () => {
    const { authorize, consume, cancel, lookup, budget, release } = client(daemon);
    const consumed = await authorize(payer, { credits: 4 });
    expect((await consume(verifier, consumed.decision_id)).status).toBe(200);
    const lapsing = await authorize(payer, { credits: 1 });
    await daemon.advanceClock(1000); // both approvals lapse
    expect((await budget("payer")).expired_unsettled_credits).toBe(5);
    expect(await budget("payer")).toMatchObject({ reserved_credits: 0, available_credits: 0 });
    expect((await lookup(verifier, consumed.decision_id)).body.state).toBe("consumed");

    const refused = await cancel(payer, consumed.decision_id);
    expect(refused.status).toBe(409);
    expect(refused.body.code).toBe("decision_consumed");
    expect((await budget("payer")).expired_unsettled_credits).toBe(5);

    const late = await consume(verifier, lapsing.decision_id);
    expect(late.status).toBe(409);
    expect(late.body).toMatchObject({ code: "reservation_expired", decision: { state: "expired" } });

    // The consumer knows nothing was signed: its release frees the lapsed credits too.
    expect((await release(verifier, consumed.decision_id)).status).toBe(200);
    expect((await budget("payer")).expired_unsettled_credits).toBe(1);
  });
});

describe("a decision keeps the reservation time it was decided under, across restarts with another", () => {
  it("a lapsed decision stays lapsed under a longer time, a held one stays held under a shorter one, and each lapses at its own expiry", async () => {
    let daemon = await startTestDaemon({ AUTHZD_RESERVATION_TTL_SECONDS: "1" }, { clockOffsetMs: 0 });
    const restartWithTtl = async (seconds: string) => {
      await daemon.stop();
      daemon = await startTestDaemon(
        { AUTHZD_RESERVATION_TTL_SECONDS: seconds },
        { home: daemon.home, clockOffsetMs: daemon.clockOffsetMs },
      );
    };
    try {
      const payer = await daemon.identity("payer", SPENDER, { budgetCredits: 5 });
      const verifier = await daemon.identity("wallet-service", ["wallet.spend.verify"]);
      const lapsed = await client(daemon).authorize(payer, { credits: 2 });
      await daemon.advanceClock(1000); // the 1 s reservation lapses
      expect((await client(daemon).budget("payer")).expired_unsettled_credits).toBe(2);
      const lapsedView = (await client(daemon).lookup(verifier, lapsed.decision_id)).body;

      // A longer reservation time does not make it consumable again: its credits may have been spent.
      await restartWithTtl("3600");
      expect((await client(daemon).lookup(verifier, lapsed.decision_id)).body).toEqual(lapsedView);
      const revived = await client(daemon).consume(verifier, lapsed.decision_id);
      expect(revived.status).toBe(409);
      expect(revived.body.code).toBe("reservation_expired");
      const held = await client(daemon).authorize(payer, { credits: 1 });

      // A shorter one does not lapse a decision made under the longer one.
      await restartWithTtl("1");
      expect((await client(daemon).lookup(verifier, held.decision_id)).body.state).toBe("approved");
      const quick = await client(daemon).authorize(payer, { credits: 1 });
      // The later decision lapses first, while the earlier one is still held.
      await daemon.advanceClock(1000);
      expect((await client(daemon).budget("payer")).expired_unsettled_credits).toBe(3);
      expect(await client(daemon).budget("payer")).toMatchObject({
        reserved_credits: 1,
        available_credits: 1,
      });
      expect((await client(daemon).lookup(verifier, quick.decision_id)).body.state).toBe("expired");
      expect((await client(daemon).consume(verifier, held.decision_id)).status).toBe(200);
      const verified = await runCli(["audit", "verify"], daemon.home);
      expect(verified.code, verified.stderr).toBe(0);
    } finally {
      await daemon.stop({ removeHome: true });
    }
  });
});

describe("a decided row whose recorded expires_at cannot be right", () => {
  it("stops the daemon from starting rather than holding the reservation for good", async () => {
    const daemon = await startTestDaemon({});
    const payer = await daemon.identity("payer", SPENDER, { budgetCredits: 5 });
    await client(daemon).authorize(payer, { credits: 1 });
    await daemon.stop();
    // The log is hash-chained but keyless: whoever can write the files can rewrite its last row, re-hash it
    // and move the head anchor to it.
    const { auditLog, auditHead } = homePaths(daemon.home);
    const lines = fs
      .readFileSync(auditLog, "utf8")
      .split("\n")
      .filter((line) => line !== "");
    const decided = (JSON.parse(lines.at(-1) as string) as { row: AuditRow }).row;
    expect(decided.kind).toBe("spend_authorization_decided");
    try {
      for (const expiresAt of ["9999-12-31T00:00:00.000Z", "not a time", null]) {
        const { line, hash } = encodeRow({ ...decided, expires_at: expiresAt } as AuditRow);
        fs.writeFileSync(auditLog, [...lines.slice(0, -1), ""].join("\n") + line);
        writeAnchorSync(auditHead, { rows: lines.length, headHash: hash });
        await expect(startTestDaemon({}, { home: daemon.home }), String(expiresAt)).rejects.toThrow(
          /expires_at .* refusing to replay it/,
        );
      }
    } finally {
      fs.rmSync(daemon.home, { recursive: true, force: true });
    }
  });
});
