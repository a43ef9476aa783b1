import { afterAll, beforeAll, expect, it } from "vitest";
import { SvcRateLimitError } from "../src/index.ts";
import { startWorld, type World } from "./support.ts";

// Its own service with a small per-credential limit (a window of a minute by the service's clock, from the
// credential's first request).
const LIMIT = 4;
let world: World;
let key: string;

beforeAll(async () => {
  world = await startWorld({ SVC_RATE_LIMIT_PER_MINUTE: String(LIMIT) });
  // A fresh credential: its window starts with this test's requests.
  key = (await world.admin.apiKeys.create({ name: "rate limited" })).key;
});
afterAll(() => world.close());

it("RateLimitExceeded surfaces as SvcRateLimitError with retryAfter and requestId once retries are spent; with a retry left the client waits Retry-After and succeeds", async () => {
  const noRetries = world.client({ apiKey: key, maxRetries: 0 });
  for (let i = 0; i < LIMIT; i++) await noRetries.chains.list();
  const error = await noRetries.chains.list().catch((e) => e);
  expect(error).toBeInstanceOf(SvcRateLimitError);
  expect(error).toMatchObject({ code: "RateLimitExceeded", status: 429 });
  expect(error.requestId).toMatch(/^req_/);
  expect(error.retryAfter).toBeGreaterThanOrEqual(1);
  expect(error.retryAfter).toBeLessThanOrEqual(60);
  // The service's clock moves to 2–3 s before the window ends, so the wait below is 3 s, not a minute (and a
  // stall of 2 s before the next request still finds the window open).
  world.server.clock.advance(error.retryAfter * 1000 - 3000);

  const seen: { status: number; at: number; retryAfter: string | null }[] = [];
  const patient = world.client({
    apiKey: key,
    maxRetries: 1,
    fetch: async (url, init) => {
      const response = await fetch(url, init);
      seen.push({
        status: response.status,
        at: performance.now(),
        retryAfter: response.headers.get("retry-after"),
      });
      return response;
    },
  });
  const chains = await patient.chains.list();
  expect(chains.map((chain) => chain.name)).toContain("base");
  expect(seen.map((s) => s.status)).toEqual([429, 200]);
  const waitedMs = (seen[1]?.at ?? 0) - (seen[0]?.at ?? 0);
  // The retry came no earlier than the service asked (a lower bound only: the machine may be slow).
  expect(waitedMs).toBeGreaterThanOrEqual(Number(seen[0]?.retryAfter) * 1000 - 5);
});

it("with retryRateLimited: false, a 429 is raised at once rather than waited out (a caller that must answer now, as /mcp)", async () => {
  const fresh = (await world.admin.apiKeys.create({ name: "impatient" })).key;
  const statuses: number[] = [];
  const impatient = world.client({
    apiKey: fresh,
    maxRetries: 2,
    retryRateLimited: false,
    fetch: async (url, init) => {
      const response = await fetch(url, init);
      statuses.push(response.status);
      return response;
    },
  });
  for (let i = 0; i < LIMIT; i++) await impatient.chains.list();
  const error = await impatient.chains.list().catch((e) => e);
  expect(error).toBeInstanceOf(SvcRateLimitError);
  expect(statuses).toEqual([200, 200, 200, 200, 429]);
  expect(() => world.client({ retryRateLimited: "no" as never })).toThrow(/retryRateLimited/);
});
