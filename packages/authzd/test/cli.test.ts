import { spawnSync } from "node:child_process";
import fs from "node:fs";
import { createServer } from "node:http";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PACKAGE_DIR, runCli, SPEND, TestDaemon } from "./harness.ts";

describe("authzd CLI", () => {
  let daemon: TestDaemon;

  beforeAll(async () => {
    daemon = await TestDaemon.start({ SPEND_AUTHZ_ENABLED: "1" });
  });

  afterAll(async () => {
    await daemon.stop();
  });

  it("creates an identity, grants and revokes capabilities against the running daemon", async () => {
    const created = await runCli(["identities", "create", "cli-agent", "--budget", "7"], daemon.home);
    expect(created.code).toBe(0);
    const identity = JSON.parse(created.stdout) as { name: string; token: string; budget_credits: number };
    expect(identity).toMatchObject({ kind: "identity_created", name: "cli-agent", budget_credits: 7 });

    const grant = await runCli(
      ["capabilities", "grant", "wallet.spend.authorize", "--to", "cli-agent"],
      daemon.home,
    );
    expect(grant.code).toBe(0);
    const verdict = await daemon.call("POST", "/spend/authorize", { token: identity.token, body: SPEND });
    expect(verdict.body).toMatchObject({ approved: true });

    const timed = await runCli(
      ["capabilities", "grant", "wallet.spend.settle", "--to", "cli-agent", "--expires-in", "3600"],
      daemon.home,
    );
    expect(JSON.parse(timed.stdout)).toMatchObject({ capability: "wallet.spend.settle", active: true });

    const list = await runCli(["capabilities", "list", "--for", "cli-agent"], daemon.home);
    const grants = (
      JSON.parse(list.stdout) as { grants: { capability: string; expires_at: string | null }[] }
    ).grants;
    expect(grants.map((g) => g.capability).sort()).toEqual(["wallet.spend.authorize", "wallet.spend.settle"]);
    expect(grants.find((g) => g.capability === "wallet.spend.settle")?.expires_at).toMatch(/Z$/);

    const revoke = await runCli(
      ["capabilities", "revoke", "wallet.spend.authorize", "--from", "cli-agent"],
      daemon.home,
    );
    expect(revoke.code).toBe(0);
    const refused = await daemon.call("POST", "/spend/authorize", { token: identity.token, body: SPEND });
    expect(refused.status).toBe(403);

    const budget = await runCli(["budgets", "show", "cli-agent"], daemon.home);
    expect(JSON.parse(budget.stdout)).toMatchObject({ budget_credits: 7, reserved_credits: 1 });
  });

  it("explains failures on stderr with a non-zero exit and no token", async () => {
    const badGrant = await runCli(
      ["capabilities", "grant", "wallet.spend.fly", "--to", "nobody"],
      daemon.home,
    );
    expect(badGrant.code).toBe(2);
    expect(badGrant.stderr).toContain("unknown capability wallet.spend.fly");
    expect(badGrant.stderr).not.toContain(daemon.operatorToken);
    const unknown = await runCli(["identities", "frobnicate"], daemon.home);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("unknown command: identities frobnicate");
  });

  it("sends the operator token only to the daemon holding the home: a killed daemon's address gets nothing", async () => {
    const killed = await TestDaemon.start({ SPEND_AUTHZ_ENABLED: "1" });
    const { port } = new URL(killed.url);
    await killed.kill();
    // Another program now listens where the killed daemon did (its daemon.json is still there).
    const asked: string[] = [];
    const squatter = createServer((request, response) => {
      asked.push(request.headers.authorization ?? "");
      response.writeHead(200, { "content-type": "application/json" }).end('{"identities":[]}');
    });
    await new Promise<void>((resolve) => squatter.listen(Number(port), "127.0.0.1", resolve));
    try {
      const run = await runCli(["identities", "list"], killed.home);
      expect(run.code).not.toBe(0);
      expect(run.stderr).toContain(`no daemon is running on ${killed.home}`);
      expect(asked).toEqual([]);
    } finally {
      squatter.close();
      fs.rmSync(killed.home, { recursive: true, force: true });
    }
  });

  it("verifies the audit log from the installed bin, on worker threads, exiting 0 when the chain is valid", () => {
    const bin = path.join(PACKAGE_DIR, "bin", "authzd.js");
    const run = spawnSync(process.execPath, [bin, "audit", "verify", "--threads", "2"], {
      cwd: PACKAGE_DIR,
      env: { PATH: process.env.PATH ?? "", AUTHZD_HOME: daemon.home },
      encoding: "utf8",
    });
    expect(run.status).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ valid: true, rows: daemon.auditRows().length });
  });
});
