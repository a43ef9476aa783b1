/**
 * `GET /audit/verify` reads the whole log on up to 4 threads each time: a burst of callers must not start a
 * verification each (an `audit.read` holder could otherwise exhaust the daemon's memory and CPU). The daemon
 * runs in this process here, so the test can count the verifications it starts.
 */
import fs from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { verifyAuditFileParallel } from "../src/audit/verify.ts";
import { type Daemon, startDaemon } from "../src/daemon.ts";
import { loadConfig } from "../src/internal/config.ts";
import { SPEND, tempHome } from "./harness.ts";

/** The verifications running now, and the most that ever ran at once. */
const running = vi.hoisted(() => ({ now: 0, most: 0 }));
vi.mock("../src/audit/verify.ts", async (importOriginal) => {
  const actual = await importOriginal<typeof import("../src/audit/verify.ts")>();
  const counted: typeof actual.verifyAuditFileParallel = async (...args) => {
    running.most = Math.max(running.most, ++running.now);
    try {
      return await actual.verifyAuditFileParallel(...args);
    } finally {
      running.now--;
    }
  };
  return { ...actual, verifyAuditFileParallel: vi.fn(counted) };
});
const verifications = vi.mocked(verifyAuditFileParallel);

let daemon: Daemon;
let operator: string;
let agent: string;

async function call(method: string, urlPath: string, token: string, body?: unknown) {
  const response = await fetch(`${daemon.url}${urlPath}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

beforeAll(async () => {
  const home = tempHome();
  daemon = await startDaemon(
    loadConfig({
      SPEND_AUTHZ_ENABLED: "1",
      AUTHZD_HOME: home,
      AUTHZD_PORT: "0",
      AUTHZD_SPEND_RATE_LIMIT_PER_SECOND: "0",
    }),
    { notice: () => {} },
  );
  operator = fs.readFileSync(path.join(home, "operator.token"), "utf8").trim();
  const created = await call("POST", "/identities", operator, { name: "agent" });
  agent = created.body.token as string;
  await call("POST", "/capabilities/grant", operator, {
    identity: "agent",
    capability: "wallet.spend.authorize",
  });
  for (let i = 0; i < 200; i++) {
    await call("POST", "/spend/authorize", agent, { ...SPEND, amount: String(100 + i) });
  }
});
afterAll(async () => {
  await daemon?.close();
});

describe("GET /audit/verify", () => {
  it("runs one verification at a time: callers that ask meanwhile share the next one", async () => {
    verifications.mockClear();
    running.most = 0;
    const reports = await Promise.all(
      Array.from({ length: 30 }, () => call("GET", "/audit/verify", operator)),
    );
    expect(reports.every((r) => r.status === 200 && r.body.valid === true)).toBe(true);
    expect(running.most).toBe(1);
    expect(verifications.mock.calls.length).toBeLessThan(30);
  });

  it("covers what was written before it was asked: a caller after a burst gets a verification of its own", async () => {
    const before = (await call("GET", "/audit/verify", operator)).body.rows as number;
    await call("POST", "/spend/authorize", agent, { ...SPEND, amount: "999" });
    verifications.mockClear();
    const after = await call("GET", "/audit/verify", operator);
    expect(after.body).toMatchObject({ valid: true });
    expect(after.body.rows as number).toBeGreaterThan(before);
    expect(verifications).toHaveBeenCalledTimes(1);
  });
});
