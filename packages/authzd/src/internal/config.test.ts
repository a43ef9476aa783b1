import path from "node:path";
import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "./config.ts";

describe("loadConfig", () => {
  it("defaults to 127.0.0.1:8421, ./.authzd, spend authorization off", () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      host: "127.0.0.1",
      port: 8421,
      home: path.resolve(".authzd"),
      spendAuthzEnabled: false,
      defaultBudgetCredits: 1000,
      budgetWindowMs: 86_400_000,
      reservationTtlMs: 600_000,
    });
    expect(config.allow.networks).toBeNull();
  });

  it("resolves the home against the directory npm was started from", () => {
    expect(loadConfig({ INIT_CWD: "/srv/app" }).home).toBe("/srv/app/.authzd");
    expect(loadConfig({ INIT_CWD: "/srv/app", AUTHZD_HOME: "state" }).home).toBe("/srv/app/state");
    expect(loadConfig({ INIT_CWD: "/srv/app", AUTHZD_HOME: "/var/authzd" }).home).toBe("/var/authzd");
  });

  it("parses allow-lists, lower-casing hex addresses", () => {
    const config = loadConfig({
      AUTHZD_ALLOW_ASSETS: "0xAbC, native ,",
      AUTHZD_RESERVATION_TTL_SECONDS: "0.5",
    });
    expect([...(config.allow.assets ?? [])]).toEqual(["0xabc", "native"]);
    expect(config.reservationTtlMs).toBe(500);
  });

  it("reports every bad variable on its own line", () => {
    const bad = () =>
      loadConfig({ AUTHZD_PORT: "http", SPEND_AUTHZ_ENABLED: "yes", AUTHZD_BUDGET_WINDOW_SECONDS: "-1" });
    expect(bad).toThrow(ConfigError);
    expect(bad).toThrow(
      [
        'SPEND_AUTHZ_ENABLED: expected 1 or 0, got "yes"',
        'AUTHZD_PORT: expected an integer between 0 and 65535, got "http"',
        'AUTHZD_BUDGET_WINDOW_SECONDS: expected a number of seconds from 0.001 to 31622400, got "-1"',
      ].join("\n"),
    );
    // A reservation time whose expiries would not be dates (or hold a reservation for months) is refused.
    expect(() => loadConfig({ AUTHZD_RESERVATION_TTL_SECONDS: "9000000000000" })).toThrow(
      'AUTHZD_RESERVATION_TTL_SECONDS: expected a number of seconds from 0.001 to 2592000, got "9000000000000"',
    );
    // Nor one under a millisecond, which rounded to none: every approval was recorded already expired, which
    // the daemon then refused to replay at every start.
    for (const name of ["AUTHZD_RESERVATION_TTL_SECONDS", "AUTHZD_BUDGET_WINDOW_SECONDS"]) {
      expect(() => loadConfig({ [name]: "0.0004" })).toThrow(
        `${name}: expected a number of seconds from 0.001 to`,
      );
    }
    expect(loadConfig({ AUTHZD_RESERVATION_TTL_SECONDS: "0.001" }).reservationTtlMs).toBe(1);
  });

  it("reads the per-call-cap ceiling and the spend rate limit (50/s, burst 100 by default; 0 switches it off)", () => {
    expect(loadConfig({})).toMatchObject({
      maxPerCallCap: null,
      spendRateLimit: { perSecond: 50, burst: 100 },
    });
    expect(
      loadConfig({
        AUTHZD_MAX_PER_CALL_CAP: "5000000",
        AUTHZD_SPEND_RATE_LIMIT_PER_SECOND: "5",
        AUTHZD_SPEND_RATE_LIMIT_BURST: "7",
      }),
    ).toMatchObject({ maxPerCallCap: "5000000", spendRateLimit: { perSecond: 5, burst: 7 } });
    expect(loadConfig({ AUTHZD_SPEND_RATE_LIMIT_PER_SECOND: "0" }).spendRateLimit).toBeNull();
    expect(() => loadConfig({ AUTHZD_MAX_PER_CALL_CAP: "5e6", AUTHZD_SPEND_RATE_LIMIT_BURST: "0" })).toThrow(
      [
        'AUTHZD_MAX_PER_CALL_CAP: expected a decimal amount of atomic units without sign, fraction or leading zeros, got "5e6"',
        'AUTHZD_SPEND_RATE_LIMIT_BURST: expected an integer between 1 and 1000000000, got "0"',
      ].join("\n"),
    );
  });
});
