/**
 * Issue 8 from the daemon's side: operator ceilings on per_call_cap, decision lookup for the wallet
 * service (wallet.spend.verify), fail-closed reservations with cancellation, the per-identity rate limit
 * on /spend/*, and all of it surviving a restart (state replayed from the audit log).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../../../test/support/eventually.ts";
import { runCli, SPEND, startTestDaemon, type TestDaemon } from "./harness.ts";

interface Verdict {
  kind: string;
  approved: boolean;
  decision_id: string;
  reason?: string;
}

interface DecisionView {
  kind: "spend_decision";
  decision_id: string;
  payer: string;
  approved: boolean;
  reason?: string;
  provider: string;
  network: string;
  asset: string;
  amount: string;
  per_call_cap: string;
  credits: number;
  destination: string;
  decided_at: string;
  expires_at: string;
  state: string;
}

const settleBody = (decisionId: string, credits: number = SPEND.credits) => ({
  decision_id: decisionId,
  provider: SPEND.provider,
  network: SPEND.network,
  asset: SPEND.asset,
  amount: SPEND.amount,
  credits,
});

const UNKNOWN_ID = `dec_${"0".repeat(32)}`;
const SPENDER = ["wallet.spend.authorize", "wallet.spend.settle"];

/** Helpers bound to one daemon. */
function client(daemon: TestDaemon) {
  return {
    authorize: (token: string, overrides: Record<string, unknown> = {}) =>
      daemon.call<Verdict>("POST", "/spend/authorize", { token, body: { ...SPEND, ...overrides } }),
    settle: (token: string, decisionId: string, credits?: number) =>
      daemon.call("POST", "/spend/settle", { token, body: settleBody(decisionId, credits) }),
    cancel: (token: string, decisionId: string) =>
      daemon.call("POST", "/spend/cancel", { token, body: { decision_id: decisionId } }),
    lookup: (token: string, decisionId: string) =>
      daemon.call<DecisionView>("GET", `/spend/decisions/${decisionId}`, { token }),
    budget: (name: string) =>
      daemon.call<Record<string, number>>("GET", `/budgets/${name}`, { token: daemon.operatorToken }),
  };
}

describe("operator ceilings on per_call_cap", () => {
  let daemon: TestDaemon;

  beforeAll(async () => {
    daemon = await startTestDaemon({ AUTHZD_MAX_PER_CALL_CAP: "4000" });
  });

  afterAll(async () => {
    await daemon.stop({ removeHome: true });
  });

  it("denies a per_call_cap above the identity's own ceiling, as a recorded verdict naming the ceiling", async () => {
    const { authorize } = client(daemon);
    const token = await daemon.identity("capped", ["wallet.spend.authorize"], { maxPerCallCap: "5000000" });
    const over = await authorize(token, { amount: "1000", per_call_cap: "9000000" });
    expect(over.status).toBe(200);
    expect(over.body).toMatchObject({
      approved: false,
      reason: "per_call_cap 9000000 exceeds the operator ceiling 5000000",
    });
    const row = daemon.auditRows().find((r) => r.decision_id === over.body.decision_id);
    expect(row).toMatchObject({
      kind: "spend_authorization_decided",
      approved: false,
      per_call_cap: "9000000",
    });
    // At the ceiling is allowed; the identity's own ceiling replaces the lower daemon default (4000).
    expect((await authorize(token, { per_call_cap: "5000000" })).body.approved).toBe(true);

    const listed = await daemon.call<{ identities: { name: string; max_per_call_cap: string | null }[] }>(
      "GET",
      "/identities",
      { token: daemon.operatorToken },
    );
    expect(listed.body.identities.find((i) => i.name === "capped")?.max_per_call_cap).toBe("5000000");
  });

  it("applies AUTHZD_MAX_PER_CALL_CAP to identities without a ceiling of their own", async () => {
    const { authorize } = client(daemon);
    const token = await daemon.identity("default-capped", ["wallet.spend.authorize"]);
    expect((await authorize(token, { per_call_cap: "4001" })).body).toMatchObject({
      approved: false,
      reason: "per_call_cap 4001 exceeds the operator ceiling 4000",
    });
    expect((await authorize(token, { per_call_cap: "4000" })).body.approved).toBe(true);
  });

  it("sets the ceiling from the CLI and refuses a malformed one with 400", async () => {
    const created = await runCli(
      ["identities", "create", "cli-capped", "--max-per-call-cap", "2500"],
      daemon.home,
      { AUTHZD_URL: daemon.url },
    );
    expect(created.code, created.stderr).toBe(0);
    expect(JSON.parse(created.stdout)).toMatchObject({ name: "cli-capped", max_per_call_cap: "2500" });
    const bad = await daemon.call("POST", "/identities", {
      token: daemon.operatorToken,
      body: { name: "bad-cap", max_per_call_cap: 2500 },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.code).toBe("invalid_body");
  });

  it("refuses credits 0 with 400 invalid_body and writes no row", async () => {
    const token = await daemon.identity("zero", ["wallet.spend.authorize"]);
    const before = daemon.auditRows().length;
    const reply = await client(daemon).authorize(token, { credits: 0 });
    expect(reply.status).toBe(400);
    expect(reply.body).toMatchObject({ code: "invalid_body" });
    expect((reply.body as unknown as { error: string }).error).toBe(
      "credits must be an integer of at least 1",
    );
    expect(daemon.auditRows().length).toBe(before);
  });
});

describe("decision lookup, cancellation and restart (long reservations)", () => {
  let daemon: TestDaemon;
  let payer: string;
  let other: string;
  let verifier: string;
  let authorizeOnly: string;
  const ids: Record<string, string> = {};

  beforeAll(async () => {
    daemon = await startTestDaemon({ AUTHZD_BUDGET_CREDITS: "100" });
    payer = await daemon.identity("payer", SPENDER, { budgetCredits: 10 });
    other = await daemon.identity("other", SPENDER);
    verifier = await daemon.identity("wallet-service", ["wallet.spend.verify"]);
    authorizeOnly = await daemon.identity("authorize-only", ["wallet.spend.authorize"]);
  });

  afterAll(async () => {
    await daemon.stop({ removeHome: true });
  });

  it("shows an approved decision to the verifier with every fact, its times and state approved; writes no row", async () => {
    const { authorize, lookup } = client(daemon);
    const verdict = await authorize(payer, { credits: 2 });
    expect(verdict.body.approved).toBe(true);
    ids.approved = verdict.body.decision_id;
    const rowsBefore = daemon.auditRows().length;
    const reply = await lookup(verifier, ids.approved);
    expect(reply.status).toBe(200);
    const row = daemon.auditRows().find((r) => r.decision_id === ids.approved) as { time: string };
    expect(reply.body).toEqual({
      kind: "spend_decision",
      decision_id: ids.approved,
      payer: "payer",
      approved: true,
      provider: SPEND.provider,
      network: SPEND.network,
      asset: SPEND.asset,
      amount: SPEND.amount,
      per_call_cap: SPEND.per_call_cap,
      credits: 2,
      destination: SPEND.destination,
      decided_at: row.time,
      // AUTHZD_RESERVATION_TTL_SECONDS defaults to 600
      expires_at: new Date(Date.parse(row.time) + 600_000).toISOString(),
      state: "approved",
    });
    expect(daemon.auditRows().length).toBe(rowsBefore);
  });

  it("shows a denied decision with its reason and state denied", async () => {
    const verdict = await client(daemon).authorize(payer, { amount: "9000" });
    expect(verdict.body.approved).toBe(false);
    ids.denied = verdict.body.decision_id;
    const reply = await client(daemon).lookup(verifier, ids.denied);
    expect(reply.body).toMatchObject({
      approved: false,
      reason: "amount 9000 exceeds per_call_cap 5000",
      amount: "9000",
      state: "denied",
    });
  });

  it("shows a settled decision as settled", async () => {
    const { authorize, settle, lookup } = client(daemon);
    ids.settled = (await authorize(payer)).body.decision_id;
    expect((await settle(payer, ids.settled)).status).toBe(200);
    expect((await lookup(verifier, ids.settled)).body.state).toBe("settled");
  });

  it("answers 404 decision_not_found for an unknown or malformed id, 403 without wallet.spend.verify", async () => {
    const { lookup } = client(daemon);
    for (const id of [UNKNOWN_ID, "dec_123", "not-a-decision", ids.approved?.toUpperCase() ?? ""]) {
      const reply = await lookup(verifier, id);
      expect(reply.status, id).toBe(404);
      expect(reply.body).toMatchObject({ code: "decision_not_found" });
    }
    const forbidden = await lookup(authorizeOnly, ids.approved as string);
    expect(forbidden.status).toBe(403);
    expect(forbidden.body).toMatchObject({ code: "missing_capability" });
    expect((await lookup(payer, ids.approved as string)).status).toBe(403);
    expect((await daemon.call("GET", `/spend/decisions/${ids.approved}`)).status).toBe(401);
    const operator = await lookup(daemon.operatorToken, ids.approved as string);
    expect(operator.status).toBe(403);
  });

  it("cancels a held reservation: its credits are freed, the row is audited, and a repeat answers the same", async () => {
    const { authorize, cancel, lookup, budget } = client(daemon);
    const verdict = await authorize(payer, { credits: 3 });
    ids.cancelled = verdict.body.decision_id;
    expect((await budget("payer")).body).toMatchObject({ reserved_credits: 5, settled_credits: 1 });
    const first = await cancel(payer, ids.cancelled);
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ kind: "spend_cancelled", decision_id: ids.cancelled });
    expect(typeof first.body.cancelled_at).toBe("string");
    expect((await budget("payer")).body).toMatchObject({
      reserved_credits: 2,
      settled_credits: 1,
      expired_unsettled_credits: 0,
      available_credits: 7,
    });
    const again = await cancel(payer, ids.cancelled);
    expect(again).toMatchObject({ status: 200, body: first.body });
    const rows = daemon.auditRows().filter((r) => r.kind === "spend_cancelled");
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ decision_id: ids.cancelled, payer: "payer" });
    expect((await lookup(verifier, ids.cancelled)).body.state).toBe("cancelled");
  });

  it("refuses to settle a cancelled decision (409 decision_cancelled) and to cancel a settled one (409 already_settled)", async () => {
    const { settle, cancel } = client(daemon);
    const late = await settle(payer, ids.cancelled as string, 3);
    expect(late.status).toBe(409);
    expect(late.body.code).toBe("decision_cancelled");
    const settled = await cancel(payer, ids.settled as string);
    expect(settled.status).toBe(409);
    expect(settled.body.code).toBe("already_settled");
  });

  it("answers 404 to cancelling an unknown, denied or another payer's decision, 403 without wallet.spend.settle, writing no row", async () => {
    const { cancel } = client(daemon);
    const before = daemon.auditRows().length;
    for (const [token, id] of [
      [payer, UNKNOWN_ID],
      [payer, ids.denied],
      [other, ids.approved],
    ] as const) {
      const reply = await cancel(token, id as string);
      expect(reply.status).toBe(404);
      expect(reply.body.code).toBe("decision_not_found");
    }
    const forbidden = await cancel(authorizeOnly, ids.approved as string);
    expect(forbidden.status).toBe(403);
    expect(forbidden.body.code).toBe("missing_capability");
    const malformed = await daemon.call("POST", "/spend/cancel", {
      token: payer,
      body: { decision_id: ids.approved, reason: "x" },
    });
    expect(malformed.status).toBe(400);
    expect(daemon.auditRows().length).toBe(before);
  });

  it("rebuilds every decision's state and the budget from the log after a restart; audit verify passes", async () => {
    const { lookup, budget } = client(daemon);
    const names = ["approved", "denied", "settled", "cancelled"];
    const before = await Promise.all(names.map((name) => lookup(verifier, ids[name] as string)));
    expect(before.map((reply) => reply.body.state)).toEqual(names);
    const budgetBefore = (await budget("payer")).body;

    await daemon.restart();

    const after = await Promise.all(names.map((name) => lookup(verifier, ids[name] as string)));
    expect(after.map((reply) => reply.body)).toEqual(before.map((reply) => reply.body));
    expect((await budget("payer")).body).toEqual(budgetBefore);
    // Still cancelled and still settled after the replay.
    expect((await client(daemon).settle(payer, ids.cancelled as string, 3)).body.code).toBe(
      "decision_cancelled",
    );
    expect((await client(daemon).cancel(payer, ids.settled as string)).body.code).toBe("already_settled");

    const verified = await runCli(["audit", "verify"], daemon.home);
    expect(verified.code, verified.stderr).toBe(0);
    expect(JSON.parse(verified.stdout)).toMatchObject({ valid: true });
    const online = await daemon.call("GET", "/audit/verify", { token: daemon.operatorToken });
    expect(online.body).toMatchObject({ valid: true });
  });
});

describe("fail-closed reservations (short reservations)", () => {
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

  const expiredUnsettled = async (credits: number): Promise<boolean> =>
    (await client(daemon).budget("payer")).body.expired_unsettled_credits === credits;

  it("keeps an unsettled expired approval counting against the budget, refuses its settlement, until it is cancelled", async () => {
    const { authorize, settle, cancel, lookup, budget } = client(daemon);
    const first = await authorize(payer, { credits: 4 });
    expect(first.body.approved).toBe(true);
    await daemon.advanceClock(1000); // the approval lapses
    expect(await expiredUnsettled(4)).toBe(true);
    expect((await budget("payer")).body).toMatchObject({
      reserved_credits: 0,
      settled_credits: 0,
      expired_unsettled_credits: 4,
      available_credits: 1,
    });
    expect((await lookup(verifier, first.body.decision_id)).body.state).toBe("expired");

    // The lapsed approval still holds 4 of 5 credits: a 2-credit spend is denied.
    const denied = await authorize(payer, { credits: 2 });
    expect(denied.body).toMatchObject({ approved: false });
    expect(denied.body.reason).toContain("4 of 5 credits");

    const late = await settle(payer, first.body.decision_id, 4);
    expect(late.status).toBe(409);
    expect(late.body.code).toBe("reservation_expired");
    expect(await expiredUnsettled(4)).toBe(true);

    // The client says the spend was never made: the credits are free again.
    const cancelled = await cancel(payer, first.body.decision_id);
    expect(cancelled.status).toBe(200);
    expect((await budget("payer")).body).toMatchObject({
      expired_unsettled_credits: 0,
      available_credits: 5,
    });
    expect((await lookup(verifier, first.body.decision_id)).body.state).toBe("cancelled");
    expect((await authorize(payer, { credits: 2 })).body.approved).toBe(true);
  });

  it("replays expired-unsettled credits and cancellations identically after a restart", async () => {
    const { authorize, lookup } = client(daemon);
    const lapsing = await authorize(payer, { credits: 1 });
    expect(lapsing.body.approved).toBe(true);
    // The 2-credit approval of the previous test and this one both lapse unsettled.
    await daemon.advanceClock(1000);
    expect(await expiredUnsettled(3)).toBe(true);
    const budgetBefore = (await client(daemon).budget("payer")).body;
    const viewBefore = (await lookup(verifier, lapsing.body.decision_id)).body;
    expect(viewBefore.state).toBe("expired");

    await daemon.restart();

    expect((await client(daemon).budget("payer")).body).toEqual(budgetBefore);
    expect((await lookup(verifier, lapsing.body.decision_id)).body).toEqual(viewBefore);
    const verified = await runCli(["audit", "verify"], daemon.home);
    expect(verified.code, verified.stderr).toBe(0);
  });
});

describe("per-identity rate limit on /spend/*", () => {
  let daemon: TestDaemon;

  beforeAll(async () => {
    daemon = await startTestDaemon({
      AUTHZD_SPEND_RATE_LIMIT_PER_SECOND: "1",
      AUTHZD_SPEND_RATE_LIMIT_BURST: "3",
    });
  });

  afterAll(async () => {
    await daemon.stop({ removeHome: true });
  });

  it("answers 429 rate_limited with Retry-After once an identity's burst is spent, on every payer's /spend/* route, writing no row; others are unaffected", async () => {
    const { authorize, settle, cancel } = client(daemon);
    const agent = await daemon.identity("agent", SPENDER);
    const neighbour = await daemon.identity("neighbour", ["wallet.spend.authorize"]);
    // One bucket for the payer's /spend/* routes: the burst of 3 goes to three different ones.
    const verdict = await authorize(agent);
    expect(verdict.status).toBe(200);
    expect((await settle(agent, UNKNOWN_ID)).status).toBe(404);
    expect((await cancel(agent, UNKNOWN_ID)).status).toBe(404);
    // At 1/s a further request passes only if a second has gone by meanwhile; keep sending until one is
    // refused, counting the admitted ones (each writes one row).
    const rowsBefore = daemon.auditRows().length;
    let admitted = 0;
    let limited = await authorize(agent);
    for (let i = 0; limited.status === 200 && i < 20; i++) {
      admitted++;
      limited = await authorize(agent);
    }
    expect(limited.status).toBe(429);
    expect(limited.body).toEqual({
      error: expect.stringContaining("too many /spend requests"),
      code: "rate_limited",
    });
    expect(limited.headers.get("retry-after")).toMatch(/^[1-9][0-9]*$/);
    expect(daemon.auditRows().length - rowsBefore).toBe(admitted);

    // The limit is per identity.
    expect((await authorize(neighbour)).status).toBe(200);

    // After Retry-After the identity is admitted again.
    await eventually(async () => (await authorize(agent)).status === 200, { intervalMs: 250 });
  });

  it("counts nothing against the wallet service's verifier: an agent's flood of made-up decision ids does not stop another agent's spend being consumed", async () => {
    const { authorize, lookup } = client(daemon);
    const payer = await daemon.identity("payer", SPENDER);
    const service = await daemon.identity("wallet-service", ["wallet.spend.verify"]);
    const consume = (decisionId: string) =>
      daemon.call<{ state?: string }>("POST", "/spend/consume", {
        token: service,
        body: { decision_id: decisionId },
      });
    // Ten times the burst, as the service passes on a busy agent's spends with made-up ids.
    for (let i = 0; i < 15; i++) {
      expect((await lookup(service, UNKNOWN_ID)).status).toBe(404);
      expect((await consume(UNKNOWN_ID)).status).toBe(404);
    }
    const verdict = await authorize(payer);
    expect(verdict.body.approved).toBe(true);
    const consumed = await consume(verdict.body.decision_id);
    expect(consumed.status).toBe(200);
    expect(consumed.body.state).toBe("consumed");
  });
});
