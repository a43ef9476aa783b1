import fs from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../../../test/support/eventually.ts";
import { type Reply, SPEND, startTestDaemon, TestDaemon } from "./harness.ts";

interface Verdict {
  kind: string;
  approved: boolean;
  decision_id: string;
  reason?: string;
  /** Present on error replies. */
  error?: string;
  code?: string;
}

interface Receipt {
  kind: string;
  receipt_id: string;
  decision_id: string;
}

const settleBody = (decisionId: string, overrides: Record<string, unknown> = {}) => ({
  decision_id: decisionId,
  provider: SPEND.provider,
  network: SPEND.network,
  asset: SPEND.asset,
  amount: SPEND.amount,
  credits: SPEND.credits,
  ...overrides,
});

describe("spend authorization daemon (enabled)", () => {
  let daemon: TestDaemon;
  let payer: string;
  let authorizeOnly: string;
  let noCapabilities: string;
  let other: string;
  let auditor: string;

  beforeAll(async () => {
    daemon = await TestDaemon.start({ SPEND_AUTHZ_ENABLED: "1", AUTHZD_BUDGET_CREDITS: "1000" });
    payer = await daemon.identity("payer", ["wallet.spend.authorize", "wallet.spend.settle"], {
      budgetCredits: 10,
    });
    authorizeOnly = await daemon.identity("authorize-only", ["wallet.spend.authorize"]);
    noCapabilities = await daemon.identity("no-capabilities", []);
    other = await daemon.identity("other", ["wallet.spend.authorize", "wallet.spend.settle"]);
    auditor = await daemon.identity("auditor", ["audit.read"]);
  });

  afterAll(async () => {
    await daemon.stop();
  });

  const authorize = (token: string, overrides: Record<string, unknown> = {}) =>
    daemon.call<Verdict>("POST", "/spend/authorize", { token, body: { ...SPEND, ...overrides } });

  it("answers /health and /version without a token", async () => {
    const health = await daemon.call("GET", "/health");
    expect({ status: health.status, body: health.body }).toEqual({ status: 200, body: { status: "ok" } });
    const pkg = JSON.parse(fs.readFileSync(new URL("../package.json", import.meta.url), "utf8")) as {
      version: string;
    };
    const version = await daemon.call("GET", "/version");
    expect({ status: version.status, body: version.body }).toEqual({
      status: 200,
      body: { name: "authzd", version: pkg.version },
    });
  });

  it("mints the operator token into operator.token with mode 0600", () => {
    const stat = fs.statSync(path.join(daemon.home, "operator.token"));
    expect(stat.mode & 0o777).toBe(0o600);
    expect(daemon.operatorToken).toMatch(/^azd_op_[A-Za-z0-9_-]{43}$/);
  });

  it("approves a spend within the per-call cap and audits the verdict with its facts", async () => {
    const reply = await authorize(other);
    expect(reply.status).toBe(200);
    expect(reply.body).toEqual({
      kind: "spend_authorized",
      approved: true,
      decision_id: expect.stringMatching(/^dec_[0-9a-f]{32}$/),
    });
    const row = daemon.auditRows().find((r) => r.decision_id === reply.body.decision_id);
    expect(row).toMatchObject({
      kind: "spend_authorization_decided",
      ...SPEND,
      approved: true,
      reason: null,
      payer: "other",
      decision_id: reply.body.decision_id,
    });
    expect(typeof row?.time).toBe("string");
  });

  it("denies a spend above the per-call cap with a reason naming the cap", async () => {
    const reply = await authorize(other, { amount: "5001" });
    expect(reply.status).toBe(200);
    expect(reply.body.approved).toBe(false);
    expect(reply.body.decision_id).toMatch(/^dec_/);
    expect(reply.body.reason).toBe("amount 5001 exceeds per_call_cap 5000");
    const row = daemon.auditRows().find((r) => r.decision_id === reply.body.decision_id);
    expect(row).toMatchObject({ approved: false, reason: "amount 5001 exceeds per_call_cap 5000" });
  });

  it("compares amounts exactly beyond 2^53 atomic units", async () => {
    const cap = "900719925474099300";
    expect((await authorize(other, { amount: cap, per_call_cap: cap })).body.approved).toBe(true);
    const over = await authorize(other, { amount: "900719925474099301", per_call_cap: cap });
    expect(over.body.approved).toBe(false);
  });

  it("denies a spend that would exceed the payer's budget, and counts only approvals", async () => {
    // payer's own budget is 10 credits.
    expect((await authorize(payer, { credits: 7 })).body.approved).toBe(true);
    expect((await authorize(payer, { amount: "9999", credits: 3 })).body.approved).toBe(false); // over cap: reserves nothing
    const over = await authorize(payer, { credits: 4 });
    expect(over.body.approved).toBe(false);
    expect(over.body.reason).toBe(
      "budget exceeded: 7 of 10 credits already reserved, settled or expired unsettled in the current window, this spend needs 4",
    );
    expect((await authorize(payer, { credits: 3 })).body.approved).toBe(true);
    const budget = await daemon.call("GET", "/budgets/payer", { token: payer });
    expect(budget.body).toMatchObject({ budget_credits: 10, reserved_credits: 10, available_credits: 0 });
  });

  it("rejects requests without a valid bearer token with 401", async () => {
    const none = await daemon.call("POST", "/spend/authorize", { body: SPEND });
    expect(none.status).toBe(401);
    expect(none.body).toEqual({ error: "missing or invalid bearer token", code: "unauthorized" });
    expect((await authorize("azd_not-a-real-token")).status).toBe(401);
    expect(
      (await daemon.call("GET", "/audit/recent", { headers: { authorization: "Basic x" } })).status,
    ).toBe(401);
  });

  it("refuses to authorize without the wallet.spend.authorize capability, writing no row", async () => {
    const before = daemon.auditRows().length;
    const reply = await authorize(noCapabilities);
    expect(reply.status).toBe(403);
    expect(reply.body).toEqual({
      error: "the caller does not hold the capability wallet.spend.authorize",
      code: "missing_capability",
    });
    expect(daemon.auditRows().length).toBe(before);
  });

  it("refuses spends made with the operator token (it only administers)", async () => {
    expect((await authorize(daemon.operatorToken)).status).toBe(403);
  });

  it("refuses to settle without the wallet.spend.settle capability", async () => {
    const verdict = await authorize(authorizeOnly);
    expect(verdict.body.approved).toBe(true);
    const reply = await daemon.call("POST", "/spend/settle", {
      token: authorizeOnly,
      body: settleBody(verdict.body.decision_id),
    });
    expect(reply.status).toBe(403);
    expect(reply.body.code).toBe("missing_capability");
    expect(reply.body.error).toContain("wallet.spend.settle");
  });

  it("fails closed when settlement facts differ from the authorized decision", async () => {
    const verdict = await authorize(other);
    const id = verdict.body.decision_id;
    const changes: Record<string, unknown>[] = [
      { amount: "1001" },
      { credits: 2 },
      { network: "eip155:1" },
      { asset: "0x0000000000000000000000000000000000000001" },
      { provider: "elsewhere" },
    ];
    for (const change of changes) {
      const reply = await daemon.call("POST", "/spend/settle", {
        token: other,
        body: settleBody(id, change),
      });
      expect(reply.status, JSON.stringify(change)).toBe(409);
      expect(reply.body.code).toBe("settle_mismatch");
      expect(reply.body.error).toContain(Object.keys(change)[0]);
    }
    expect(daemon.auditRows().filter((r) => r.kind === "spend_settled" && r.decision_id === id)).toHaveLength(
      0,
    );
    const ok = await daemon.call("POST", "/spend/settle", { token: other, body: settleBody(id) });
    expect(ok.status).toBe(200);
  });

  it("fails closed when settling another payer's decision, a denied decision or an unknown one", async () => {
    const mine = await authorize(other);
    const stolen = await daemon.call("POST", "/spend/settle", {
      token: payer,
      body: settleBody(mine.body.decision_id),
    });
    expect(stolen.status).toBe(404);
    const denied = await authorize(other, { amount: "6000" });
    const deniedSettle = await daemon.call("POST", "/spend/settle", {
      token: other,
      body: settleBody(denied.body.decision_id, { amount: "6000" }),
    });
    expect(deniedSettle.status).toBe(404);
    const unknown = await daemon.call("POST", "/spend/settle", {
      token: other,
      body: settleBody(`dec_${"0".repeat(32)}`),
    });
    expect(unknown.status).toBe(404);
    expect(unknown.body.code).toBe("decision_not_found");
  });

  it("settles idempotently: a repeat returns the same receipt and debits once", async () => {
    const settler = await daemon.identity("settler", ["wallet.spend.authorize", "wallet.spend.settle"], {
      budgetCredits: 100,
    });
    const verdict = await authorize(settler, { credits: 5 });
    const body = settleBody(verdict.body.decision_id, { credits: 5, tx_sig: "0xfeed" });
    const first = await daemon.call<Receipt>("POST", "/spend/settle", { token: settler, body });
    expect(first.status).toBe(200);
    expect(first.body).toEqual({
      kind: "spend_settled",
      receipt_id: expect.stringMatching(/^rcp_[0-9a-f]{32}$/),
      decision_id: verdict.body.decision_id,
    });
    const [second, third] = await Promise.all([
      daemon.call<Receipt>("POST", "/spend/settle", { token: settler, body }),
      daemon.call<Receipt>("POST", "/spend/settle", { token: settler, body }),
    ]);
    // The same reply; only its Date header may differ (the repeats can answer in the next second).
    const withoutDate = ({ headers, ...reply }: Reply<Receipt>) => ({
      ...reply,
      headers: [...headers].filter(([name]) => name !== "date"),
    });
    expect(withoutDate(second)).toEqual(withoutDate(first));
    expect(withoutDate(third)).toEqual(withoutDate(first));
    const rows = daemon
      .auditRows()
      .filter((r) => r.kind === "spend_settled" && r.decision_id === verdict.body.decision_id);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({
      receipt_id: first.body.receipt_id,
      credits: 5,
      tx_sig: "0xfeed",
      payer: "settler",
    });
    const budget = await daemon.call("GET", "/budgets/settler", { token: settler });
    expect(budget.body).toMatchObject({ reserved_credits: 0, settled_credits: 5, available_credits: 95 });
  });

  it("takes tx_sig: null in a settle body as absent", async () => {
    const verdict = await authorize(other);
    const reply = await daemon.call<Receipt>("POST", "/spend/settle", {
      token: other,
      body: settleBody(verdict.body.decision_id, { tx_sig: null }),
    });
    expect(reply.status).toBe(200);
    expect(reply.body.kind).toBe("spend_settled");
    const row = daemon
      .auditRows()
      .find((r) => r.kind === "spend_settled" && r.decision_id === verdict.body.decision_id);
    expect(row).toMatchObject({ receipt_id: reply.body.receipt_id, tx_sig: null });
  });

  it("settles concurrently sent duplicates of a fresh decision into one receipt", async () => {
    const verdict = await authorize(other);
    const body = settleBody(verdict.body.decision_id);
    const replies = await Promise.all(
      Array.from({ length: 8 }, () => daemon.call<Receipt>("POST", "/spend/settle", { token: other, body })),
    );
    expect(new Set(replies.map((r) => r.body.receipt_id)).size).toBe(1);
    expect(replies.every((r) => r.status === 200)).toBe(true);
    const rows = daemon
      .auditRows()
      .filter((r) => r.kind === "spend_settled" && r.decision_id === verdict.body.decision_id);
    expect(rows).toHaveLength(1);
  });

  it("rejects malformed bodies with 400, wrong media types with 415 and oversized bodies with 413", async () => {
    const bad = await authorize(other, { network: "base" });
    expect(bad.status).toBe(400);
    expect(bad.body).toEqual({
      error: 'network must be a CAIP-2 chain id "namespace:reference", e.g. "eip155:8453"',
      code: "invalid_body",
    });
    expect((await authorize(other, { extra: 1 })).body.error).toBe('unknown field "extra"');
    const media = await daemon.call("POST", "/spend/authorize", {
      token: other,
      raw: JSON.stringify(SPEND),
      headers: { "content-type": "text/plain" },
    });
    expect(media.status).toBe(415);
    const huge = await daemon.call("POST", "/spend/authorize", {
      token: other,
      body: { ...SPEND, destination: "x".repeat(20_000) },
    });
    expect(huge.status).toBe(413);
  });

  it("stops honouring a capability once revoked or expired", async () => {
    const token = await daemon.identity("short-lived", []);
    // Long enough for the first call to come well before it on a loaded machine.
    const expiresAt = new Date(Date.now() + 5000).toISOString();
    const grant = await daemon.call("POST", "/capabilities/grant", {
      token: daemon.operatorToken,
      body: { identity: "short-lived", capability: "wallet.spend.authorize", expires_at: expiresAt },
    });
    expect(grant.body).toMatchObject({ kind: "capability_granted", expires_at: expiresAt });
    expect((await authorize(token)).status).toBe(200);
    // Once it has expired (asked again until then, never a guessed sleep), it is refused.
    await eventually(async () => (await authorize(token)).status === 403, {
      intervalMs: 250,
      describe: "the capability to expire",
    });

    await daemon.call("POST", "/capabilities/grant", {
      token: daemon.operatorToken,
      body: { identity: "short-lived", capability: "wallet.spend.authorize" },
    });
    expect((await authorize(token)).status).toBe(200);
    const revoke = await daemon.call("POST", "/capabilities/revoke", {
      token: daemon.operatorToken,
      body: { identity: "short-lived", capability: "wallet.spend.authorize" },
    });
    expect(revoke.status).toBe(200);
    expect((await authorize(token)).status).toBe(403);
    const kinds = daemon
      .auditRows()
      .filter((r) => r.identity === "short-lived")
      .map((r) => r.kind);
    expect(kinds).toEqual(["capability_granted", "capability_granted", "capability_revoked"]);
  });

  it("answers odd paths and methods with 4xx, never 5xx", async () => {
    const token = daemon.operatorToken;
    expect((await daemon.call("GET", "/budgets/%E0%A4%A", { token })).status).toBe(400);
    expect((await daemon.call("GET", "/budgets/nobody", { token })).status).toBe(404);
    expect((await daemon.call("GET", "/budgets/a/b", { token })).status).toBe(404);
    expect((await daemon.call("GET", "/spend/authorize", { token })).status).toBe(405);
    expect((await daemon.call("DELETE", "/identities", { token })).status).toBe(405);
    expect((await daemon.call("GET", "/nope")).status).toBe(404);
    expect((await daemon.call("GET", "/audit/recent?limit=abc", { token })).status).toBe(400);
  });

  it("keeps administration to the operator and the audit log to the operator and audit.read holders", async () => {
    expect((await daemon.call("POST", "/identities", { token: payer, body: { name: "x" } })).status).toBe(
      403,
    );
    expect((await daemon.call("GET", "/audit/recent", { token: payer })).status).toBe(403);
    const recent = await daemon.call<{ rows: Record<string, unknown>[] }>("GET", "/audit/recent?limit=3", {
      token: auditor,
    });
    expect(recent.status).toBe(200);
    expect(recent.body.rows).toHaveLength(3);
    expect(recent.body.rows[2]?.seq).toBe(daemon.auditRows().length - 1);
    expect((await daemon.call("GET", "/audit/recent?limit=0", { token: auditor })).status).toBe(400);
    const verify = await daemon.call("GET", "/audit/verify", { token: auditor });
    expect(verify.body).toEqual({
      rows: daemon.auditRows().length,
      valid: true,
      headHash: expect.any(String),
    });
  });

  it("stores tokens only hashed: no token appears in the daemon's files or output", () => {
    const files = fs.readdirSync(daemon.home).filter((f) => f !== "operator.token");
    // A file the daemon is replacing (written as `<name>.tmp`, then renamed) may be gone by the time it is
    // read: its content is under its final name.
    const read = (f: string) => {
      try {
        return fs.readFileSync(path.join(daemon.home, f), "utf8");
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === "ENOENT" && f.endsWith(".tmp")) return "";
        throw error;
      }
    };
    const stored = files.map(read).join("\n") + daemon.output();
    for (const token of [payer, other, auditor, daemon.operatorToken]) {
      expect(stored.includes(token)).toBe(false);
    }
    expect(stored).toContain("token_sha256");
  });
});

describe("spend authorization daemon (not enabled)", () => {
  let daemon: TestDaemon;

  beforeAll(async () => {
    daemon = await TestDaemon.start({ SPEND_AUTHZ_ENABLED: "0" });
  });

  afterAll(async () => {
    await daemon.stop();
  });

  it("refuses authorize, settle, cancel and lookup with 503 when SPEND_AUTHZ_ENABLED=1 is not set, writing no verdict", async () => {
    const token = await daemon.identity("agent", ["wallet.spend.authorize", "wallet.spend.settle"]);
    const reply = await daemon.call("POST", "/spend/authorize", { token, body: SPEND });
    expect(reply.status).toBe(503);
    expect(reply.body).toEqual({
      error: "spend authorization is not enabled: start the daemon with SPEND_AUTHZ_ENABLED=1",
      code: "spend_authz_disabled",
    });
    const settle = await daemon.call("POST", "/spend/settle", {
      token,
      body: settleBody(`dec_${"a".repeat(32)}`),
    });
    expect(settle.status).toBe(503);
    const cancel = await daemon.call("POST", "/spend/cancel", {
      token,
      body: { decision_id: `dec_${"a".repeat(32)}` },
    });
    expect(cancel.body).toMatchObject({ code: "spend_authz_disabled" });
    const verifier = await daemon.identity("verifier", ["wallet.spend.verify"]);
    const lookup = await daemon.call("GET", `/spend/decisions/dec_${"a".repeat(32)}`, { token: verifier });
    expect(lookup.status).toBe(503);
    expect(lookup.body).toMatchObject({ code: "spend_authz_disabled" });
    expect(daemon.auditRows().some((r) => String(r.kind).startsWith("spend_"))).toBe(false);
  });
});

describe("spend authorization daemon (allow-lists, short reservations)", () => {
  let daemon: TestDaemon;
  let token: string;

  beforeAll(async () => {
    daemon = await startTestDaemon(
      {
        SPEND_AUTHZ_ENABLED: "1",
        AUTHZD_BUDGET_CREDITS: "2",
        AUTHZD_RESERVATION_TTL_SECONDS: "1",
        AUTHZD_ALLOW_NETWORKS: "eip155:8453,solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp",
        AUTHZD_ALLOW_DESTINATIONS: SPEND.destination.toUpperCase().replace("0X", "0x"),
      },
      { clockOffsetMs: 0 },
    );
    token = await daemon.identity("agent", ["wallet.spend.authorize", "wallet.spend.settle"]);
  });

  afterAll(async () => {
    await daemon.stop();
  });

  const authorize = (overrides: Record<string, unknown> = {}) =>
    daemon.call<Verdict>("POST", "/spend/authorize", { token, body: { ...SPEND, ...overrides } });

  it("denies spends that an allow-list does not admit, naming the fact", async () => {
    const network = await authorize({ network: "eip155:1" });
    expect(network.body).toMatchObject({
      approved: false,
      reason: "network eip155:1 is not on the allow-list",
    });
    const destination = await authorize({ destination: "0x2222222222222222222222222222222222222222" });
    expect(destination.body.reason).toBe(
      "destination 0x2222222222222222222222222222222222222222 is not on the allow-list",
    );
  });

  it("keeps counting a reservation that is not settled in time (fail-closed), and refuses to settle it afterwards", async () => {
    const first = await authorize({ credits: 2 });
    expect(first.body.approved).toBe(true);
    expect((await authorize({ credits: 1 })).body.approved).toBe(false);
    await daemon.advanceClock(1000); // the approval lapses
    expect((await daemon.call("GET", "/budgets/agent", { token })).body.expired_unsettled_credits).toBe(2);
    // The money may have been spent: the lapsed approval still holds the whole budget of 2.
    const after = await authorize({ credits: 1 });
    expect(after.body).toMatchObject({ approved: false });
    expect(after.body.reason).toContain("2 of 2 credits");
    const late = await daemon.call("POST", "/spend/settle", {
      token,
      body: settleBody(first.body.decision_id, { credits: 2 }),
    });
    expect(late.status).toBe(409);
    expect(late.body.code).toBe("reservation_expired");
    const budget = await daemon.call("GET", "/budgets/agent", { token });
    expect(budget.body).toMatchObject({
      reserved_credits: 0,
      expired_unsettled_credits: 2,
      available_credits: 0,
    });
  });
});
