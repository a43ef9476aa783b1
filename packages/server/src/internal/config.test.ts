import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "./config.ts";

describe("loadConfig", () => {
  it("applies the documented defaults", () => {
    const config = loadConfig({});
    expect(config).toMatchObject({ port: 8080, host: "127.0.0.1", dataDir: "./.svc-data", logLevel: "info" });
    expect(config.databaseUrl).toBeUndefined();
    expect(config.masterKey).toBeUndefined();
  });

  it("decodes a base64 master key of 32 bytes", () => {
    const key = Buffer.alloc(32, 1);
    expect(loadConfig({ SVC_MASTER_KEY: key.toString("base64") }).masterKey?.equals(key)).toBe(true);
  });

  it("names every bad variable in one line", () => {
    const bad = {
      PORT: "eighty",
      SVC_MASTER_KEY: Buffer.alloc(16).toString("base64"),
      DATABASE_URL: "mysql://x",
      LOG_LEVEL: "loud",
    };
    let message = "";
    try {
      loadConfig(bad);
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      message = (error as Error).message;
    }
    expect(message.split("\n")).toHaveLength(1);
    for (const name of ["PORT", "SVC_MASTER_KEY", "DATABASE_URL", "LOG_LEVEL"])
      expect(message).toContain(name);
    // The bad key's value is not echoed back.
    expect(message).not.toContain(bad.SVC_MASTER_KEY);
  });

  it("refuses an interval or timeout longer than a timer can wait, which Node.js would run after 1 ms", () => {
    const names = [
      "SVC_CONFIRMER_INTERVAL_MS",
      "SVC_WEBHOOK_POLL_MS",
      "SVC_REQUEST_TIMEOUT_MS",
      "SVC_WATCH_INTERVAL_MS",
      "SVC_X402_FETCH_TIMEOUT_MS",
    ];
    const longest = Object.fromEntries(names.map((name) => [name, "2147483647"]));
    // A paid fetch's two requests fit in the minute a client and an Idempotency-Key claim give it.
    longest.SVC_X402_FETCH_TIMEOUT_MS = "25000";
    expect(loadConfig(longest)).toMatchObject({
      confirmerIntervalMs: 2147483647,
      x402FetchTimeoutMs: 25_000,
    });
    expect(() => loadConfig({ SVC_X402_FETCH_TIMEOUT_MS: "25001" })).toThrow(
      "SVC_X402_FETCH_TIMEOUT_MS: must be at most 25000",
    );
    for (const name of names) {
      expect(() => loadConfig({ [name]: "3000000000" }), name).toThrow(
        `${name}: must be at most 2147483647 (about 24.8 days)`,
      );
    }
  });

  it("refuses an approval time or an event retention too long to be a date, rather than failing each held spend", () => {
    expect(
      loadConfig({ SVC_APPROVAL_TTL_SECONDS: "31536000", SVC_EVENT_RETENTION_DAYS: "36500" }),
    ).toMatchObject({
      approvalTtlSeconds: 31_536_000,
      eventRetentionDays: 36_500,
    });
    expect(() => loadConfig({ SVC_APPROVAL_TTL_SECONDS: "9007199254740991" })).toThrow(
      "SVC_APPROVAL_TTL_SECONDS: must be at most 31536000 (a year)",
    );
    expect(() => loadConfig({ SVC_EVENT_RETENTION_DAYS: "9007199254740991" })).toThrow(
      "SVC_EVENT_RETENTION_DAYS: must be at most 36500 (a hundred years)",
    );
  });

  it("exempts loopback from the outbound guard on the devnet profile only, unless SVC_OUTBOUND_ALLOW says", () => {
    expect(loadConfig({}).outboundAllow).toEqual(["127.0.0.0/8", "::1/128", "localhost"]);
    expect(loadConfig({ SVC_NETWORK_PROFILE: "testnet" }).outboundAllow).toEqual([]);
    expect(loadConfig({ SVC_NETWORK_PROFILE: "mainnet" }).outboundAllow).toEqual([]);
    expect(
      loadConfig({
        SVC_NETWORK_PROFILE: "mainnet",
        SVC_OUTBOUND_ALLOW: " 10.0.0.0/8, fd00::/8,Internal.Example ",
      }).outboundAllow,
    ).toEqual(["10.0.0.0/8", "fd00::/8", "internal.example"]);
    expect(loadConfig({ SVC_OUTBOUND_ALLOW: "192.168.1.20" }).outboundAllow).toEqual(["192.168.1.20"]);
  });

  it("refuses an SVC_OUTBOUND_ALLOW entry that is neither a range nor a hostname", () => {
    for (const value of ["10.0.0.0/33", "http://x", "*.example.com", "a b"]) {
      expect(() => loadConfig({ SVC_OUTBOUND_ALLOW: value })).toThrow(
        /SVC_OUTBOUND_ALLOW: must be a comma-separated list/,
      );
    }
  });

  it("reads SVC_ALLOWED_HOSTS as host names, or * for any, and refuses anything else", () => {
    expect(loadConfig({}).allowedHosts).toEqual([]);
    expect(loadConfig({ SVC_ALLOWED_HOSTS: " Wallet.Example.com,svc.internal " }).allowedHosts).toEqual([
      "wallet.example.com",
      "svc.internal",
    ]);
    expect(loadConfig({ SVC_ALLOWED_HOSTS: "*" }).allowedHosts).toBe("any");
    // As a request names them: a container's name with `_`, a unicode name in punycode, no final dot.
    expect(
      loadConfig({ SVC_ALLOWED_HOSTS: "my_svc,bücher.example,wallet.example.com." }).allowedHosts,
    ).toEqual(["my_svc", "xn--bcher-kva.example", "wallet.example.com"]);
    for (const value of [
      "*.example.com",
      "example.com:8080",
      "http://example.com",
      "a b",
      "a@b",
      "[::1]",
      ".",
    ]) {
      expect(() => loadConfig({ SVC_ALLOWED_HOSTS: value })).toThrow(
        /SVC_ALLOWED_HOSTS: must be a comma-separated list of hostnames/,
      );
    }
    // Not "…or * for any; not \"*\"", which contradicted itself.
    expect(() => loadConfig({ SVC_ALLOWED_HOSTS: "*,wallet.example.com" })).toThrow(
      "SVC_ALLOWED_HOSTS: must be * alone (any host), or host names without *",
    );
  });

  it("stops `npm start` with that one line and exit code 1", async () => {
    const main = fileURLToPath(new URL("../main.ts", import.meta.url));
    const run = promisify(execFile)(process.execPath, ["--import", "tsx", main], {
      env: { ...process.env, PORT: "not-a-port", DATABASE_URL: "" },
    });
    await expect(run).rejects.toMatchObject({ code: 1 });
    const failure = (await run.catch((error: { stderr: string }) => error)) as { stderr: string };
    expect(failure.stderr.trim()).toMatch(/^svc: Invalid configuration: PORT: .+$/);
  });
});
