import { createServer, type RequestListener } from "node:http";
import type { AddressInfo } from "node:net";
import { startTestDaemon, type TestDaemon } from "@svc/authzd/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AuthzdClient } from "./client.ts";

let daemon: TestDaemon;
let agent: string;
let verifierToken: string;

beforeAll(async () => {
  daemon = await startTestDaemon();
  agent = await daemon.identity("agent", ["wallet.spend.authorize", "wallet.spend.settle"]);
  verifierToken = await daemon.identity("svc-service", ["wallet.spend.verify"]);
});
afterAll(async () => {
  await daemon?.stop({ removeHome: true });
});

/** Collects what the client logs. */
function recordingLog() {
  const lines: { fields: Record<string, unknown>; message: string }[] = [];
  return {
    lines,
    warn: (fields: Record<string, unknown>, message: string) => lines.push({ fields, message }),
  };
}

/** An HTTP server of the test's own on loopback (a fake daemon, a gateway): its URL, and how to stop it. */
async function localServer(handler: RequestListener): Promise<{ url: string; close: () => void }> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => server.close(),
  };
}

async function approvedDecision(): Promise<string> {
  const verdict = await daemon.call<{ approved: boolean; decision_id: string }>("POST", "/spend/authorize", {
    token: agent,
    body: {
      provider: "svc",
      network: "eip155:8453",
      asset: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
      amount: "1000",
      per_call_cap: "5000",
      credits: 1,
      destination: "0x1111111111111111111111111111111111111111",
    },
  });
  expect(verdict.body.approved).toBe(true);
  return verdict.body.decision_id;
}

describe("AuthzdClient", () => {
  it("consumes a decision once, tells an unconsumable one by its state and an unknown one apart, and releases", async () => {
    const client = new AuthzdClient({ url: daemon.url, token: verifierToken });
    const decisionId = await approvedDecision();
    const first = await client.consumeDecision(decisionId);
    expect(first).toMatchObject({
      consumed: true,
      decision: { decisionId, amount: "1000", state: "consumed" },
    });
    expect(await client.consumeDecision(decisionId)).toMatchObject({
      consumed: false,
      decision: { decisionId, state: "consumed" },
    });
    expect(await client.consumeDecision("dec_totally_made_up")).toEqual({
      consumed: false,
      decision: undefined,
    });
    expect(await client.releaseDecision(decisionId)).toBe(true);
    expect(await client.consumeDecision(decisionId)).toMatchObject({
      consumed: false,
      decision: { state: "released" },
    });
  });

  it("logs a release the daemon refuses or cannot be asked for, never throws, and never logs its token", async () => {
    const log = recordingLog();
    const client = new AuthzdClient({ url: daemon.url, token: verifierToken }, log);
    // Nobody consumed this one: the daemon refuses the release.
    const unconsumed = await approvedDecision();
    expect(await client.releaseDecision(unconsumed)).toBe(false);
    expect(log.lines[0]?.fields).toMatchObject({
      decisionId: unconsumed,
      status: 409,
      code: "not_consumed_by_caller",
    });

    const down = new AuthzdClient({ url: "http://127.0.0.1:1", token: verifierToken }, log);
    expect(await down.releaseDecision(unconsumed)).toBe(false);
    expect(log.lines[1]?.message).toContain("could not reach the authorization daemon");
    expect(log.lines[1]?.fields).toMatchObject({ decisionId: unconsumed });
    await expect(down.consumeDecision(unconsumed)).rejects.toMatchObject({ reason: "authzd_unavailable" });
    expect(JSON.stringify(log.lines)).not.toContain(verifierToken);
  });

  it("takes a 200 to a consume only when it shows this decision, approved and now consumed", async () => {
    const decisionId = await approvedDecision();
    const real = await daemon.call<Record<string, unknown>>("GET", `/spend/decisions/${decisionId}`, {
      token: verifierToken,
    });
    const consumed = { ...real.body, state: "consumed", consumed_at: new Date().toISOString() };
    // A FAKE daemon (a wrong URL, a proxy, a broken build): every answer is 200 with a decision that is not
    // this one consumed.
    for (const answer of [
      { ...consumed, approved: false, state: "denied" },
      { ...consumed, state: "cancelled" },
      { ...consumed, decision_id: "dec_ffffffffffffffffffffffffffffffff" },
      { ...consumed, credits: undefined },
    ]) {
      const fake = await localServer((_request, response) =>
        response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(answer)),
      );
      const client = new AuthzdClient({ url: fake.url, token: verifierToken });
      try {
        await expect(client.consumeDecision(decisionId)).rejects.toMatchObject({
          reason: "authzd_unavailable",
        });
      } finally {
        fake.close();
      }
    }
    // The real daemon's answer is taken.
    const client = new AuthzdClient({ url: daemon.url, token: verifierToken });
    expect(await client.consumeDecision(decisionId)).toMatchObject({
      consumed: true,
      decision: { decisionId, state: "consumed", credits: 1 },
    });
  });

  it("follows no redirect: a gateway's 307 is an unavailable daemon, and the daemon's credential goes nowhere else", async () => {
    const arrived: string[] = [];
    const elsewhere = await localServer((request, response) => {
      arrived.push(`${request.method} ${request.url} ${request.headers.authorization ?? ""}`);
      response.writeHead(404).end();
    });
    const gateway = await localServer((request, response) => {
      response.writeHead(307, { location: `${elsewhere.url}${request.url}` }).end();
    });
    const client = new AuthzdClient({ url: gateway.url, token: verifierToken });
    try {
      // Followed, the other host's 404 read as "no such decision".
      await expect(client.consumeDecision("dec_redirected")).rejects.toMatchObject({
        reason: "authzd_unavailable",
      });
      await expect(client.getDecision("dec_redirected")).rejects.toMatchObject({
        reason: "authzd_unavailable",
      });
      expect(arrived).toEqual([]);
    } finally {
      gateway.close();
      elsewhere.close();
    }
  });

  it("reads only the daemon's own 404 as an unknown decision: another 404 (a gateway's, a wrong path) is an unavailable daemon", async () => {
    const elsewhere = await localServer((_request, response) =>
      response
        .writeHead(404, { "content-type": "application/json" })
        .end(JSON.stringify({ error: "no route", code: "route_not_found" })),
    );
    const client = new AuthzdClient({ url: elsewhere.url, token: verifierToken });
    try {
      await expect(client.consumeDecision("dec_anything")).rejects.toMatchObject({
        reason: "authzd_unavailable",
      });
      await expect(client.getDecision("dec_anything")).rejects.toMatchObject({
        reason: "authzd_unavailable",
      });
    } finally {
      elsewhere.close();
    }
    // The daemon's own 404 is an unknown decision.
    const daemonClient = new AuthzdClient({ url: daemon.url, token: verifierToken });
    expect(await daemonClient.getDecision("dec_totally_made_up")).toBeUndefined();
  });
});
