import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { auditRowsOf, fundedWallet, type GatedWorld, startGatedWorld } from "./support.ts";

const run = promisify(execFile);
const PACKAGE_DIR = fileURLToPath(new URL("..", import.meta.url));
const TSC = fileURLToPath(new URL("../../../node_modules/typescript/bin/tsc", import.meta.url));

let world: GatedWorld;
let work: string;
let app: string;
let tarball: string;

beforeAll(async () => {
  work = fs.mkdtempSync(path.join(os.tmpdir(), "sdk-pack-"));
  await run("npm", ["run", "build"], { cwd: PACKAGE_DIR });
  const packed = await run("npm", ["pack", "--json", "--pack-destination", work], { cwd: PACKAGE_DIR });
  const [info] = JSON.parse(packed.stdout) as { filename: string; files: { path: string }[] }[];
  tarball = path.join(work, info?.filename as string);
  // An empty project, as a user would start one. The SDK's one dependency, standardwebhooks (with its two),
  // comes from the registry through npm's cache.
  app = path.join(work, "app");
  fs.mkdirSync(app);
  fs.writeFileSync(
    path.join(app, "package.json"),
    JSON.stringify({ name: "app", private: true, type: "module" }),
  );
  await run("npm", ["install", "--no-audit", "--no-fund", "--ignore-scripts", "--prefer-offline", tarball], {
    cwd: app,
  });
  world = await startGatedWorld();
});
afterAll(async () => {
  await world?.close();
  fs.rmSync(work, { recursive: true, force: true });
});

describe("the packed package", () => {
  it("holds the ESM build with declarations, the README and package.json only", async () => {
    const listed = await run("tar", ["-tzf", tarball]);
    const files = listed.stdout.trim().split("\n").sort();
    expect(files).toContain("package/dist/index.js");
    expect(files).toContain("package/dist/index.d.ts");
    expect(files).toContain("package/dist/node/index.js");
    expect(files).toContain("package/dist/node/index.d.ts");
    expect(files).toContain("package/README.md");
    expect(files.every((file) => /^package\/(dist\/|README\.md$|package\.json$)/.test(file))).toBe(true);
    expect(files.some((file) => file.endsWith(".test.js"))).toBe(false);
    const manifest = JSON.parse(
      fs.readFileSync(path.join(app, "node_modules/@svc/sdk/package.json"), "utf8"),
    );
    expect(Object.keys(manifest.dependencies ?? {})).toEqual(["standardwebhooks"]);
  });

  it("the main entry imports nothing node-only (a browser can load it); the file store is in @svc/sdk/node", () => {
    const root = path.join(app, "node_modules/@svc/sdk/dist");
    const seen = new Set<string>();
    const visit = (file: string): void => {
      if (seen.has(file)) return;
      seen.add(file);
      const text = fs.readFileSync(file, "utf8");
      for (const match of text.matchAll(/(?:^|\n)\s*(?:import|export)[^;]*?from\s+"([^"]+)"/g)) {
        const specifier = match[1] as string;
        // The one package imported: checked below.
        if (specifier === "standardwebhooks") continue;
        expect(specifier.startsWith("."), `${path.relative(root, file)} imports ${specifier}`).toBe(true);
        visit(path.resolve(path.dirname(file), specifier));
      }
      // Comments (TSDoc examples mention process.env) are not code.
      const code = text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
      expect(code, path.relative(root, file)).not.toMatch(/\bprocess\.|\brequire\(|from "node:/);
    };
    visit(path.join(root, "index.js"));
    expect(seen.size).toBeGreaterThan(5);
    expect([...seen].some((file) => file.includes(`${path.sep}node${path.sep}`))).toBe(false);
    expect(fs.readFileSync(path.join(root, "node/file-store.js"), "utf8")).toContain('from "node:fs"');
    // standardwebhooks and its dependencies require only each other: no Node built-in, no process.
    const modules = path.join(app, "node_modules");
    const packages = ["standardwebhooks", "@stablelib/base64", "fast-sha256"];
    for (const name of packages) {
      const manifest = JSON.parse(fs.readFileSync(path.join(modules, name, "package.json"), "utf8"));
      const main = fs.readFileSync(path.join(modules, name, manifest.main), "utf8");
      const dir = path.dirname(path.join(modules, name, manifest.main));
      const files = [
        main,
        ...fs
          .readdirSync(dir)
          .filter((f) => f.endsWith(".js"))
          .map((f) => fs.readFileSync(path.join(dir, f), "utf8")),
      ];
      for (const text of files) {
        for (const match of text.matchAll(/require\(["']([^"']+)["']\)/g)) {
          const specifier = match[1] as string;
          if (specifier === "@stablelib/benchmark") continue; // its benchmark file, never loaded
          expect(
            specifier.startsWith(".") || packages.includes(specifier),
            `${name} requires ${specifier}`,
          ).toBe(true);
        }
        expect(text, name).not.toMatch(/\bprocess\.|from "node:/);
      }
    }
  });

  it("verifyWebhook runs from the tarball: a body signed by standardwebhooks verifies, a tampered one is refused", async () => {
    fs.writeFileSync(
      path.join(app, "verify.mjs"),
      [
        'import { Webhook } from "standardwebhooks";',
        'import { SvcWebhookVerificationError, verifyWebhook } from "@svc/sdk";',
        'const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";',
        'const body = JSON.stringify({ type: "spend.alert", timestamp: new Date().toISOString(), data: { usdValue: "3.00" } });',
        "const at = new Date();",
        'const headers = { "webhook-id": "evt_1", "webhook-timestamp": String(Math.floor(at / 1000)), "webhook-signature": new Webhook(secret).sign("evt_1", at, body) };',
        "console.log(JSON.stringify(verifyWebhook(body, headers, secret)));",
        "try {",
        '  verifyWebhook(body.replace("3.00", "0.01"), headers, secret);',
        "} catch (error) {",
        "  console.log(JSON.stringify({ refused: error instanceof SvcWebhookVerificationError, reason: error.reason }));",
        "}",
        "",
      ].join("\n"),
    );
    const result = await run(process.execPath, ["verify.mjs"], { cwd: app });
    const [verified, refused] = result.stdout
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line));
    expect(verified).toMatchObject({ type: "spend.alert", data: { usdValue: "3.00" } });
    expect(refused).toEqual({ refused: true, reason: "invalid_signature" });
  });

  it("its types check in a strict TypeScript project (exports map and .d.ts)", async () => {
    fs.writeFileSync(
      path.join(app, "check.ts"),
      [
        'import { SvcWallet, SvcSpendDeniedError, verifyWebhook, type Transaction, type FailedSettlementRecord } from "@svc/sdk";',
        'import { FileSettlementStore } from "@svc/sdk/node";',
        'const svc = new SvcWallet({ apiKey: "svc_x", authz: { gatewayUrl: "http://127.0.0.1:8421", token: "t", settlementStore: new FileSettlementStore("f.json") } });',
        "export async function pay(): Promise<Transaction> {",
        '  const wallet = await svc.wallet.get("wal_x");',
        '  return wallet.send({ to: "0x1", amount: 1, token: "USDC", chain: "base" });',
        "}",
        "export const failed: FailedSettlementRecord[] = svc.authz?.listFailedSettlements() ?? [];",
        "export const denied = (e: unknown): string | undefined => (e instanceof SvcSpendDeniedError ? e.decisionId : undefined);",
        'export const verified = (body: string, headers: Headers, secret: string): string => { const event = verifyWebhook(body, headers, secret); return event.type === "approval.requested" ? event.data.status : event.type; };',
        "export const held = (): Promise<string[]> => svc.approvals.list().then((list) => list.map((a) => a.expiresAt));",
        "",
      ].join("\n"),
    );
    fs.writeFileSync(
      path.join(app, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          noEmit: true,
          module: "nodenext",
          moduleResolution: "nodenext",
          target: "es2022",
          lib: ["es2023", "dom"],
          types: [],
          skipLibCheck: false,
        },
        files: ["check.ts"],
      }),
    );
    const checked = await run(process.execPath, [TSC, "-p", "."], { cwd: app }).catch((error) => error);
    expect(`${checked.stdout ?? ""}${checked.stderr ?? ""}`).toBe("");
  });

  it("installed into an empty directory, the quickstart runs a send end to end against a started service", async () => {
    fs.copyFileSync(path.join(PACKAGE_DIR, "examples/quickstart.mjs"), path.join(app, "quickstart.mjs"));
    const adminKey = await world.admin.apiKeys.create({ name: "quickstart owner", role: "admin" });
    const payee = await world.admin.wallet.create({ name: "payee", chains: ["base"] });
    const result = await run(process.execPath, ["quickstart.mjs"], {
      cwd: app,
      env: {
        PATH: process.env.PATH ?? "",
        SVC_BASE_URL: world.baseUrl,
        SVC_ADMIN_KEY: adminKey.key,
        PAYEE: payee.evm?.address as string,
      },
    });
    const [sent, refused] = result.stdout
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line));
    expect(sent).toMatchObject({
      type: "send",
      amount: "1.5",
      token: "USDC",
      chain: "base",
      to: payee.evm?.address,
    });
    expect(sent.txHash).toMatch(/^0x[0-9a-f]{64}$/);
    expect(refused).toMatchObject({ code: "PolicyViolation", reason: "max_per_tx" });
    // The service has the send.
    expect(await world.admin.transactions.get(sent.id)).toMatchObject({ txHash: sent.txHash, amount: "1.5" });
  });

  it("the approvals example runs from the tarball: held, the agent refused, the owner approves, confirmed, the event log in order", async () => {
    fs.copyFileSync(path.join(PACKAGE_DIR, "examples/approvals.mjs"), path.join(app, "approvals.mjs"));
    const adminKey = await world.admin.apiKeys.create({ name: "approvals owner", role: "admin" });
    const payee = await world.admin.wallet.create({ name: "approvals payee", chains: ["base"] });
    const result = await run(process.execPath, ["approvals.mjs"], {
      cwd: app,
      env: {
        PATH: process.env.PATH ?? "",
        SVC_BASE_URL: world.baseUrl,
        SVC_ADMIN_KEY: adminKey.key,
        PAYEE: payee.evm?.address as string,
      },
    });
    const [held, agent, waiting, done, ...events] = result.stdout
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line));
    expect(held).toMatchObject({ status: "pending_approval", approval: { status: "pending" } });
    expect(agent).toEqual({ agentApproves: "SvcForbiddenError", reason: "insufficient_role" });
    expect(waiting.map((approval: { id: string }) => approval.id)).toContain(held.id);
    expect(done).toMatchObject({ status: "confirmed", txHash: expect.stringMatching(/^0x[0-9a-f]{64}$/) });
    const about = events.filter((event: { about: string }) => event.about === held.id);
    expect(about.map((event: { type: string }) => event.type)).toEqual([
      "transaction.created",
      "approval.requested",
      "spend.alert",
      "approval.approved",
      "transaction.confirmed",
    ]);
    expect(await world.admin.transactions.get(held.id)).toMatchObject({
      status: "confirmed",
      txHash: done.txHash,
    });
  });

  it("the gate example runs from the tarball against a daemon: approved, submitted with its decision, settled; the over-cap send denied", async () => {
    fs.copyFileSync(path.join(PACKAGE_DIR, "examples/gate.mjs"), path.join(app, "gate.mjs"));
    const payer = await fundedWallet(world.admin, { maxPerTx: "5" });
    const payee = await world.admin.wallet.create({ name: "gate payee", chains: ["base"] });
    const result = await run(process.execPath, ["gate.mjs"], {
      cwd: app,
      env: {
        PATH: process.env.PATH ?? "",
        SVC_BASE_URL: world.baseUrl,
        SVC_API_KEY: world.accessToken,
        WALLET: payer.id,
        PAYEE: payee.evm?.address as string,
        AUTHZD_URL: world.daemonUrl,
        AUTHZD_TOKEN: world.agentToken,
      },
    });
    const [sent, denied, failed] = result.stdout
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line));
    expect(sent.spendDecisionId).toMatch(/^dec_/);
    expect(auditRowsOf(world.daemon, "spend_settled").map((row) => row.decision_id)).toContain(
      sent.spendDecisionId,
    );
    expect(denied.denied).toMatch(/exceeds per_call_cap 5000000/);
    expect(failed).toEqual({ failedSettlements: [] });
    expect((await payer.transactions({ type: "send" })).data.map((tx) => tx.id)).toEqual([sent.id]);
  });
});
