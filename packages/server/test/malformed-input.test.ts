import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestServer, expectErrorShape, seedAccount, type TestServer } from "./support/test-server.ts";

/** A small seeded PRNG (mulberry32), so a failing case can be replayed from its seed. */
function prng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n: number) => Math.floor(next() * n);
  const pick = <T>(items: readonly T[]): T => items[int(items.length)] as T;
  return { next, int, pick };
}

type Rng = ReturnType<typeof prng>;

const WEIRD_STRINGS = [
  "",
  " ",
  "\u0000",
  "💸".repeat(50),
  "a".repeat(5000),
  "<script>alert(1)</script>",
  "' OR 1=1 --",
  "../../etc/passwd",
  "%00",
  "NaN",
  "-1",
  "1e309",
  "0x10",
  "svc_",
  "wal_",
  "\ud800",
  "null",
  "true",
];

function randomValue(rng: Rng, depth = 0): unknown {
  switch (rng.int(depth > 2 ? 6 : 9)) {
    case 0:
      return rng.pick(WEIRD_STRINGS);
    case 1:
      return rng.pick([0, -1, 1.5, 1e308, -0, 2 ** 53 + 1, 12]);
    case 2:
      return rng.pick([true, false, null]);
    case 3:
      return "x".repeat(rng.int(300));
    case 4:
      return rng.pick(["base", "solana", "dogecoin", "USDC", "send", "x402"]);
    case 5:
      return `${rng.int(1000)}.${rng.int(10 ** 9)}`;
    case 6:
      return Array.from({ length: rng.int(5) }, () => randomValue(rng, depth + 1));
    default: {
      const object: Record<string, unknown> = {};
      for (let i = rng.int(5); i > 0; i--) {
        object[
          rng.pick([
            "name",
            "chains",
            "metadata",
            "policy",
            "email",
            "password",
            "__proto__",
            "constructor",
            "maxPerTx",
            "whitelist",
            "x",
          ])
        ] = randomValue(rng, depth + 1);
      }
      return object;
    }
  }
}

/** A body that is wrong in shape, in type, or in syntax. */
function malformedBody(rng: Rng, template: Record<string, unknown>): { raw: string; contentType: string } {
  const kind = rng.int(6);
  if (kind === 0) {
    const json = JSON.stringify(template);
    return { raw: json.slice(0, rng.int(json.length)), contentType: "application/json" }; // truncated
  }
  if (kind === 1) return { raw: JSON.stringify(randomValue(rng)), contentType: "application/json" };
  if (kind === 2) {
    const key = rng.pick(Object.keys(template).concat(["extra"]));
    return { raw: JSON.stringify({ ...template, [key]: randomValue(rng) }), contentType: "application/json" };
  }
  if (kind === 3)
    return {
      raw: '{"__proto__": {"admin": true}, "constructor": {"prototype": {}}}',
      contentType: "application/json",
    };
  if (kind === 4)
    return {
      raw: JSON.stringify(template),
      contentType: rng.pick([
        "text/plain",
        "application/xml",
        "multipart/form-data; boundary=x",
        "application/json; charset=latin1",
        "application/jsonx",
      ]),
    };
  const bytes = Buffer.from(Array.from({ length: rng.int(200) }, () => rng.int(256)));
  return { raw: bytes.toString("latin1"), contentType: "application/json" };
}

/** Percent-encodes a path segment; a lone surrogate becomes an invalid UTF-8 sequence, which is junk worth sending. */
function pathSegment(text: string): string {
  try {
    return encodeURIComponent(text);
  } catch {
    return "%ED%A0%80";
  }
}

const QUERY_JUNK = [
  "limit=abc",
  "limit=-5",
  "limit=1e2",
  "offset=1.5",
  "type=SEND",
  "chain=",
  "limit=",
  "offset=99999999999999",
  "a[b]=c",
  "limit[]=1",
  "%zz=1",
  "type=send&type=receive",
  "chain=base%00",
  "limit=10&offset=-0",
];

let server: TestServer;
let apiKey: string;
let accessToken: string;
let walletId: string;
let keyId: string;

beforeAll(async () => {
  server = await createTestServer();
  ({ apiKey, accessToken, apiKeyId: keyId } = await seedAccount(server.api));
  walletId = (await server.api.post("/v1/wallets", { name: "fuzz", chains: ["base", "solana"] }, apiKey)).body
    .id;
});
afterAll(() => server.close());

describe("malformed input", () => {
  it("answers 1,600 generated malformed requests across every route with no 5xx and every error in shape", async () => {
    const rng = prng(20261122);
    const routes = [
      {
        method: "POST",
        path: "/v1/auth/register",
        template: { email: "f@example.com", password: "twelve-chars-at-least" },
        auth: false,
      },
      {
        method: "POST",
        path: "/v1/auth/login",
        template: { email: "f@example.com", password: "twelve-chars-at-least" },
        auth: false,
      },
      { method: "POST", path: "/v1/api-keys", template: { name: "k" }, auth: true },
      { method: "GET", path: "/v1/api-keys", auth: true },
      {
        method: "DELETE",
        path: () =>
          rng.pick([
            `/v1/api-keys/${rng.pick(WEIRD_STRINGS)}`,
            "/v1/api-keys/key_%00",
            `/v1/api-keys/${keyId}x`,
          ]),
        auth: true,
      },
      {
        method: "POST",
        path: "/v1/wallets",
        template: { name: "w", chains: ["base"], metadata: {}, policy: { maxPerTx: "1" } },
        auth: true,
      },
      { method: "GET", path: "/v1/wallets", auth: true },
      { method: "GET", path: () => `/v1/wallets/${pathSegment(rng.pick(WEIRD_STRINGS))}`, auth: true },
      {
        method: "DELETE",
        path: () => `/v1/wallets/${rng.pick(["wal_", "wal_!!", "x", "%2e%2e", `wal_${"a".repeat(300)}`])}`,
        auth: true,
      },
      {
        method: "GET",
        path: () => `/v1/wallets/${walletId}/transactions?${rng.pick(QUERY_JUNK)}`,
        auth: true,
      },
      {
        method: "GET",
        path: () => `/v1/${rng.pick(["walets", "wallets/x/y/z", "..%2f..%2f", "api-keys/x/y"])}`,
        auth: true,
      },
      { method: "GET", path: "/healthz", auth: false },
      {
        method: "POST",
        path: () => `/v1/wallets/${walletId}/send`,
        template: {
          to: "0x000000000000000000000000000000000000dEaD",
          amount: "1",
          token: "USDC",
          chain: "base",
        },
        auth: true,
      },
      {
        method: "PATCH",
        path: () => `/v1/wallets/${walletId}/policy`,
        template: { maxPerTx: "10", dailyLimit: "50", whitelist: [] },
        auth: true,
      },
      {
        method: "POST",
        path: () =>
          `/v1/wallets/${rng.pick([walletId, "wal_x", "x"])}/policy/${rng.pick(["pause", "resume", "stop"])}`,
        auth: true,
      },
      { method: "GET", path: () => `/v1/transactions/${pathSegment(rng.pick(WEIRD_STRINGS))}`, auth: true },
    ] as const;
    const badAuthorizations = [
      "",
      "Bearer",
      "Bearer ",
      "Basic dXNlcjpwYXNz",
      `Bearer ${apiKey}x`,
      `Bearer ${"svc_".padEnd(200, "Z")}`,
      `bearer  ${accessToken.slice(0, -3)}abc`,
      "Bearer a.b.c",
      `Token ${apiKey}`,
      "Bearer \u00ff\u00fe",
    ];

    const failures: string[] = [];
    let sent = 0;
    const total = 1600;
    const one = async (i: number) => {
      const route = routes[i % routes.length] as (typeof routes)[number];
      const path = typeof route.path === "function" ? route.path() : route.path;
      const headers: Record<string, string> = {};
      const mode = rng.int(4);
      // Most requests carry a good credential so that validation, not authentication, is exercised.
      if (route.auth && mode !== 0) headers.authorization = `Bearer ${rng.pick([apiKey, accessToken])}`;
      else if (mode === 0)
        headers.authorization = rng.pick(badAuthorizations).replace(/[^\t\x20-\x7e\x80-\xff]/g, "");
      let raw: string | undefined;
      if ("template" in route && route.template) {
        const body = malformedBody(rng, route.template);
        raw = body.raw;
        headers["content-type"] = body.contentType;
      } else if (route.method !== "GET" && rng.int(2) === 0) {
        raw = JSON.stringify(randomValue(rng));
        headers["content-type"] = "application/json";
      }
      const response = await server.api.request(route.method, path, {
        ...(raw !== undefined ? { rawBody: raw } : {}),
        headers,
      });
      sent++;
      const label = `#${i} ${route.method} ${path.slice(0, 100)} ${headers["content-type"] ?? ""} ${raw?.slice(0, 80) ?? ""}`;
      if (response.status >= 500)
        failures.push(`${response.status} ${label}: ${response.text.slice(0, 200)}`);
      if (!response.headers.get("x-request-id")) failures.push(`no X-Request-Id ${label}`);
      if (response.status >= 400) {
        try {
          expectErrorShape(response);
        } catch (error) {
          failures.push(`${(error as Error).message} ${label}`);
        }
      }
    };
    for (let i = 0; i < total; i += 8) {
      await Promise.all(Array.from({ length: Math.min(8, total - i) }, (_, j) => one(i + j)));
    }
    expect(sent).toBe(total);
    expect(failures).toEqual([]);
  });
});
