import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { eventually } from "../../../../test/support/eventually.ts";
import { AuditLog } from "../audit/log.ts";
import { GENESIS_HASH } from "../audit/rows.ts";
import { loadConfig } from "../internal/config.ts";
import { HttpError } from "../internal/errors.ts";
import { AuthzService } from "./service.ts";
import { AuthzState, type Identity } from "./state.ts";

const SPEND = {
  provider: "svc",
  network: "eip155:8453",
  asset: "0xa0b8",
  amount: "5",
  per_call_cap: "10",
  credits: 1,
  destination: "0xd00d",
};

const settleBody = (decisionId: string) => ({
  decision_id: decisionId,
  provider: SPEND.provider,
  network: SPEND.network,
  asset: SPEND.asset,
  amount: SPEND.amount,
  credits: SPEND.credits,
});

/** A service whose state holds identity "agent" (authorize and settle), over the log file `file`. */
function setup(file: string) {
  const config = loadConfig({ SPEND_AUTHZ_ENABLED: "1" });
  const state = new AuthzState(config.budgetWindowMs, config.reservationTtlMs);
  const time = new Date().toISOString();
  state.apply({
    kind: "identity_created",
    name: "agent",
    token_sha256: "f".repeat(64),
    budget_credits: 10,
    seq: 0,
    prev: GENESIS_HASH,
    time,
  });
  for (const capability of ["wallet.spend.authorize", "wallet.spend.settle"]) {
    state.apply({
      kind: "capability_granted",
      identity: "agent",
      capability,
      expires_at: null,
      seq: 1,
      prev: GENESIS_HASH,
      time,
    });
  }
  const failures: Error[] = [];
  const log = AuditLog.open(file, { rows: 0, headHash: GENESIS_HASH, bytes: 0 }, []);
  const service = new AuthzService(config, state, log, file, (error) => failures.push(error));
  const agent = state.identities.get("agent") as Identity;
  return { service, log, agent, failures };
}

function tempLog(): string {
  return path.join(fs.mkdtempSync(path.join(os.tmpdir(), "authzd-service-")), "audit.jsonl");
}

type SyncCallback = (error: NodeJS.ErrnoException | null) => void;

/** Replaces fdatasync: each call is held until the test completes it. */
function holdSyncs(): SyncCallback[] {
  const held: SyncCallback[] = [];
  vi.spyOn(fs, "fdatasync").mockImplementation(((_fd: number, callback: SyncCallback) => {
    held.push(callback);
  }) as typeof fs.fdatasync);
  return held;
}

/** Makes every fdatasync fail with EIO, like a failing disk. */
function failSyncs(): void {
  vi.spyOn(fs, "fdatasync").mockImplementation(((_fd: number, callback: SyncCallback) => {
    const error: NodeJS.ErrnoException = new Error("EIO: i/o error, fdatasync");
    error.code = "EIO";
    setImmediate(() => callback(error));
  }) as typeof fs.fdatasync);
}

/** Whether `promise` is still pending after the event loop has had several turns. */
async function isPending(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  promise.then(
    () => {
      done = true;
    },
    () => {
      done = true;
    },
  );
  for (let i = 0; i < 10; i++) await new Promise((resolve) => setImmediate(resolve));
  return !done;
}

/** Calls `read` (sync or async) and returns its outcome as a promise. */
const later = <T>(read: () => T | Promise<T>): Promise<T> => Promise.resolve().then(read);

afterEach(() => {
  vi.restoreAllMocks();
});

describe("AuthzService when the audit log cannot be written", () => {
  it("returns no verdict (503 audit_unavailable) and reports the failure exactly once", async () => {
    const { service, agent, failures } = setup("/dev/full"); // every write fails with ENOSPC

    const attempt = service.authorize(agent, SPEND);
    await expect(attempt).rejects.toBeInstanceOf(HttpError);
    // Its row was in the write that failed: it may have reached the disk in part, so the answer says so.
    await expect(attempt).rejects.toMatchObject({
      status: 503,
      code: "audit_unavailable",
      message: expect.stringMatching(/may have reached it before the failure/),
    });
    // Later requests are refused before anything is written.
    await expect(service.authorize(agent, SPEND)).rejects.toMatchObject({
      status: 503,
      message: expect.stringMatching(/no verdict was recorded/),
    });
    await expect(service.settle(agent, settleBody(`dec_${"0".repeat(32)}`))).rejects.toMatchObject({
      status: 503,
      code: "audit_unavailable",
    });
    expect(failures).toHaveLength(1);
    expect(failures[0]?.message).toMatch(/ENOSPC/);
  });

  it("never answers a settle whose row failed to sync as settled, not even when it is retried", async () => {
    const { service, agent, failures } = setup(tempLog());
    const verdict = await service.authorize(agent, SPEND);
    expect(verdict.approved).toBe(true);

    failSyncs();
    await expect(service.settle(agent, settleBody(verdict.decision_id))).rejects.toMatchObject({
      status: 503,
      code: "audit_unavailable",
    });
    vi.restoreAllMocks(); // the disk works again; the daemon still gives nothing until restarted

    await expect(service.settle(agent, settleBody(verdict.decision_id))).rejects.toMatchObject({
      status: 503,
      code: "audit_unavailable",
    });
    await expect(later(() => service.budget("agent"))).rejects.toMatchObject({ status: 503 });
    await expect(service.authorize(agent, SPEND)).rejects.toMatchObject({ status: 503 });
    expect(failures).toHaveLength(1);
  });

  it("never reports an approval whose row failed to sync: no verdict, and the budget is not shown", async () => {
    const { service, agent, failures } = setup(tempLog());
    failSyncs();
    await expect(service.authorize(agent, SPEND)).rejects.toMatchObject({ status: 503 });
    vi.restoreAllMocks();
    await expect(later(() => service.budget("agent"))).rejects.toMatchObject({
      status: 503,
      code: "audit_unavailable",
    });
    await expect(later(() => service.listIdentities())).rejects.toMatchObject({ status: 503 });
    await expect(service.authorize(agent, SPEND)).rejects.toMatchObject({ status: 503 });
    expect(failures).toHaveLength(1);
  });

  it("fails a duplicate settle that arrived while the first one's sync was pending, with it", async () => {
    const { service, agent } = setup(tempLog());
    const verdict = await service.authorize(agent, SPEND);
    const held = holdSyncs();
    const first = service.settle(agent, settleBody(verdict.decision_id));
    const duplicate = service.settle(agent, settleBody(verdict.decision_id));
    await eventually(() => held.length === 1);
    expect(await isPending(first)).toBe(true);
    expect(await isPending(duplicate)).toBe(true);
    const error: NodeJS.ErrnoException = new Error("EIO: i/o error, fdatasync");
    error.code = "EIO";
    held[0]?.(error);
    await expect(first).rejects.toMatchObject({ status: 503 });
    await expect(duplicate).rejects.toMatchObject({ status: 503 });
  });
});

describe("AuthzService answers only after the row is durable", () => {
  it("holds a verdict, and a budget read that includes it, until the fdatasync completes", async () => {
    const { service, agent } = setup(tempLog());
    const held = holdSyncs();
    const verdict = service.authorize(agent, SPEND);
    await eventually(() => held.length === 1);
    expect(await isPending(verdict)).toBe(true);
    // The reservation is already counted (so concurrent requests cannot overspend) but not shown yet.
    const budget = later(() => service.budget("agent"));
    expect(await isPending(budget)).toBe(true);

    held[0]?.(null);
    await expect(verdict).resolves.toMatchObject({ kind: "spend_authorized", approved: true });
    await expect(budget).resolves.toMatchObject({ reserved_credits: 1, available_credits: 9 });
  });

  it("holds a repeated settle until the first settlement's row is durable", async () => {
    const { service, agent } = setup(tempLog());
    const verdict = await service.authorize(agent, SPEND);
    const held = holdSyncs();
    const first = service.settle(agent, settleBody(verdict.decision_id));
    await eventually(() => held.length === 1);
    const repeat = service.settle(agent, settleBody(verdict.decision_id));
    expect(await isPending(first)).toBe(true);
    expect(await isPending(repeat)).toBe(true);
    held[0]?.(null);
    const receipt = await first;
    await expect(repeat).resolves.toEqual(receipt);
  });
});
