import { describe, expect, it } from "vitest";
import { AuditLog } from "../audit/log.ts";
import { GENESIS_HASH } from "../audit/rows.ts";
import { loadConfig } from "../internal/config.ts";
import { HttpError } from "../internal/errors.ts";
import { AuthzService } from "./service.ts";
import { AuthzState } from "./state.ts";

const SPEND = {
  provider: "svc",
  network: "eip155:8453",
  asset: "0xa0b8",
  amount: "5",
  per_call_cap: "10",
  credits: 1,
  destination: "0xd00d",
};

describe("AuthzService when the audit log cannot be written", () => {
  it("returns no verdict (503 audit_unavailable) and reports the failure once", async () => {
    const config = loadConfig({ SPEND_AUTHZ_ENABLED: "1" });
    const state = new AuthzState(config.budgetWindowMs, config.reservationTtlMs);
    state.apply({
      kind: "identity_created",
      name: "agent",
      token_sha256: "f".repeat(64),
      budget_credits: null,
      seq: 0,
      prev: GENESIS_HASH,
      time: new Date().toISOString(),
    });
    state.apply({
      kind: "capability_granted",
      identity: "agent",
      capability: "wallet.spend.authorize",
      expires_at: null,
      seq: 1,
      prev: GENESIS_HASH,
      time: new Date().toISOString(),
    });
    const failures: Error[] = [];
    const log = AuditLog.open("/dev/full", { rows: 2, headHash: GENESIS_HASH, bytes: 0 }, []);
    const service = new AuthzService(config, state, log, "/dev/full", (error) => failures.push(error));
    const agent = state.identities.get("agent");
    if (agent === undefined) throw new Error("identity not applied");

    const attempt = service.authorize(agent, SPEND);
    await expect(attempt).rejects.toBeInstanceOf(HttpError);
    await expect(attempt).rejects.toMatchObject({ status: 503, code: "audit_unavailable" });
    await expect(service.authorize(agent, SPEND)).rejects.toMatchObject({ status: 503 });
    expect(failures.length).toBeGreaterThanOrEqual(1);
    expect(failures[0]?.message).toMatch(/ENOSPC/);
  });
});
