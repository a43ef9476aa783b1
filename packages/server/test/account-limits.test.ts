/**
 * What one account may hold. Every wallet (archived ones too) is watched for receives, so one account with
 * thousands of wallets slowed every other account's receives (2000 wallets: another account's receive was
 * recorded after 9–15 s instead of 0.2–2 s); and every API key has its own rate limit, so unlimited keys
 * meant an unlimited rate. Creations are counted under a lock on the account, so a burst of them at once
 * cannot pass the limit together.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_ENDPOINTS_PER_ACCOUNT } from "../src/webhooks/endpoints.ts";
import { createTestServer, expectErrorShape, seedAccount, type TestServer } from "./support/test-server.ts";

const MAX_WALLETS = 3;
const MAX_API_KEYS = 4;

let server: TestServer;

beforeAll(async () => {
  server = await createTestServer({
    env: {
      SVC_MAX_WALLETS_PER_ACCOUNT: String(MAX_WALLETS),
      SVC_MAX_API_KEYS_PER_ACCOUNT: String(MAX_API_KEYS),
    },
  });
});
afterAll(() => server.close());

/** Sends `count` creations at once; returns the answers' statuses and bodies. */
async function burst(count: number, create: (i: number) => ReturnType<TestServer["api"]["post"]>) {
  return Promise.all(Array.from({ length: count }, (_, i) => create(i)));
}

describe("wallets per account", () => {
  it("admits exactly the limit of creations sent at once; the rest are 409 too_many_wallets, and archiving frees no place", async () => {
    const owner = await seedAccount(server.api);
    const answers = await burst(MAX_WALLETS + 4, (i) =>
      server.api.post("/v1/wallets", { name: `w${i}`, chains: ["base"] }, owner.accessToken),
    );
    expect(answers.filter((a) => a.status === 201)).toHaveLength(MAX_WALLETS);
    const refused = answers.filter((a) => a.status !== 201);
    expect(refused).toHaveLength(4);
    for (const answer of refused) {
      expect(answer.status).toBe(409);
      expect(expectErrorShape(answer)).toMatchObject({
        code: "ValidationError",
        reason: "too_many_wallets",
        details: { max: MAX_WALLETS },
      });
    }
    const listed = (await server.api.get("/v1/wallets", owner.accessToken)).body as { id: string }[];
    expect(listed).toHaveLength(MAX_WALLETS);

    // An archived wallet is still watched for receives, so it still counts.
    expect((await server.api.delete(`/v1/wallets/${listed[0]?.id}`, owner.accessToken)).status).toBe(204);
    const again = await server.api.post(
      "/v1/wallets",
      { name: "after archive", chains: ["base"] },
      owner.accessToken,
    );
    expect(again.status).toBe(409);

    // Another account's limit is its own.
    const neighbour = await seedAccount(server.api);
    const theirs = await server.api.post(
      "/v1/wallets",
      { name: "theirs", chains: ["base"] },
      neighbour.apiKey,
    );
    expect(theirs.status).toBe(201);
  });
});

describe("API keys per account", () => {
  it("admits exactly the limit of keys not revoked, sent at once; the rest are 409 too_many_api_keys, and revoking one frees a place", async () => {
    const owner = await seedAccount(server.api); // holds one key already
    const answers = await burst(MAX_API_KEYS + 3, (i) =>
      server.api.post("/v1/api-keys", { name: `k${i}` }, owner.accessToken),
    );
    const created = answers.filter((a) => a.status === 201);
    expect(created).toHaveLength(MAX_API_KEYS - 1);
    for (const answer of answers.filter((a) => a.status !== 201)) {
      expect(answer.status).toBe(409);
      const error = expectErrorShape(answer);
      expect(error).toMatchObject({
        code: "ValidationError",
        reason: "too_many_api_keys",
        details: { max: MAX_API_KEYS },
      });
      // The refusal shows no key.
      expect(answer.text).not.toMatch(/svc_[a-z]+_/);
    }
    expect((await server.api.get("/v1/api-keys", owner.accessToken)).body).toHaveLength(MAX_API_KEYS);

    // A revoked key frees its place; an expired one does not (it stays listed until the owner revokes it).
    const revoked = await server.api.delete(
      `/v1/api-keys/${(created[0]?.body as { id: string } | undefined)?.id}`,
      owner.accessToken,
    );
    expect(revoked.status).toBe(204);
    const expiresAt = new Date(server.clock.now().getTime() + 60_000).toISOString();
    const shortLived = await server.api.post(
      "/v1/api-keys",
      { name: "short-lived", expiresAt },
      owner.accessToken,
    );
    expect(shortLived.status).toBe(201);
    server.clock.advance(120_000);
    const afterExpiry = await server.api.post("/v1/api-keys", { name: "one more" }, owner.accessToken);
    expect(afterExpiry.status).toBe(409);
    expect(expectErrorShape(afterExpiry).reason).toBe("too_many_api_keys");
  });
});

describe("webhook endpoints per account", () => {
  it(`admits ${MAX_ENDPOINTS_PER_ACCOUNT} endpoints sent at once and refuses the rest with 409 too_many_webhook_endpoints`, async () => {
    const owner = await seedAccount(server.api);
    const answers = await burst(MAX_ENDPOINTS_PER_ACCOUNT + 3, (i) =>
      server.api.post("/v1/webhook-endpoints", { url: `http://127.0.0.1:9/hook/${i}` }, owner.accessToken),
    );
    expect(answers.filter((a) => a.status === 201)).toHaveLength(MAX_ENDPOINTS_PER_ACCOUNT);
    for (const answer of answers.filter((a) => a.status !== 201)) {
      expect(answer.status).toBe(409);
      expect(expectErrorShape(answer).reason).toBe("too_many_webhook_endpoints");
    }
  });
});
