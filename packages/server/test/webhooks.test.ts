import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fundEvm } from "@svc/devnet";
import { sql } from "drizzle-orm";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { selectRows } from "../src/internal/db/store.ts";
import { RETRY_DELAYS_MS } from "../src/webhooks/delivery.ts";
import { MAX_QUEUED_REDELIVERIES } from "../src/webhooks/endpoints.ts";
import { eventually } from "./support/eventually.ts";
import { unpackInitializedPglite } from "./support/pglite-setup.ts";
import { waitForSettled } from "./support/spends.ts";
import {
  type ApiClient,
  createFreshDatabase,
  createTestServer,
  expectErrorShape,
  seedAccount,
  sharedDevnet,
  type TestServer,
} from "./support/test-server.ts";
import { type Received, WebhookReceiver } from "./support/webhook-receiver.ts";

interface Delivery {
  eventId: string;
  attempt: number;
  status: string;
  redelivery: boolean;
  responseStatus: number | null;
  error?: string;
  at: string;
}

let server: TestServer;
const receivers: WebhookReceiver[] = [];

async function receiver(): Promise<WebhookReceiver> {
  const created = await new WebhookReceiver().listen();
  receivers.push(created);
  return created;
}

beforeAll(async () => {
  await sharedDevnet();
  server = await createTestServer();
});
afterAll(async () => {
  await server.close();
  await Promise.all(receivers.map((r) => r.close()));
});

async function createEndpoint(api: ApiClient, token: string, body: Record<string, unknown>) {
  const created = await api.post("/v1/webhook-endpoints", body, token);
  expect(created.status, created.text).toBe(201);
  return created.body as { id: string; url: string; events: string[] | null; secret: string };
}

async function deliveries(api: ApiClient, token: string, endpointId: string): Promise<Delivery[]> {
  const response = await api.get(`/v1/webhook-endpoints/${endpointId}/deliveries?limit=100`, token);
  expect(response.status, response.text).toBe(200);
  return response.body.data;
}

/** Every event the account has, oldest first (as GET /v1/events pages them). */
async function accountEvents(api: ApiClient, token: string): Promise<{ id: string; type: string }[]> {
  const response = await api.get("/v1/events?limit=100", token);
  expect(response.status, response.text).toBe(200);
  return response.body.data;
}

const patchPolicy = (api: ApiClient, token: string, walletId: string, body: Record<string, unknown>) =>
  api.request("PATCH", `/v1/wallets/${walletId}/policy`, { token, body });

/** An account with a wallet and an endpoint at `target` receiving `policy.updated`, and one such change. */
async function onePolicyEventTo(target: WebhookReceiver) {
  const owner = await seedAccount(server.api);
  const wallet = await server.api.post("/v1/wallets", { name: "w", chains: ["base"] }, owner.apiKey);
  const endpoint = await createEndpoint(server.api, owner.apiKey, {
    url: target.url,
    events: ["policy.updated"],
  });
  expect((await patchPolicy(server.api, owner.apiKey, wallet.body.id, { maxPerTx: "3" })).status).toBe(200);
  return { owner, wallet, endpoint };
}

describe("webhook deliveries", () => {
  it("are signed as Standard Webhooks specifies, carry the event, and start after the endpoint's creation", async () => {
    const target = await receiver();
    const owner = await seedAccount(server.api);
    const endpoint = await createEndpoint(server.api, owner.apiKey, {
      url: target.url,
      description: "all of it",
    });
    expect(endpoint.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(endpoint).toMatchObject({ url: target.url, events: null });

    const key = await server.api.post("/v1/api-keys", { name: "bot", role: "agent" }, owner.apiKey);
    expect(key.status).toBe(201);
    await eventually(() => target.requests.length >= 1, { describe: "the first delivery" });
    const [delivery] = target.requests;
    if (!delivery) throw new Error("no delivery");
    const verified = new Webhook(endpoint.secret).verify(delivery.body, {
      "webhook-id": String(delivery.headers["webhook-id"]),
      "webhook-timestamp": String(delivery.headers["webhook-timestamp"]),
      "webhook-signature": String(delivery.headers["webhook-signature"]),
    }) as { type: string; timestamp: string; data: Record<string, unknown> };
    expect(verified.type).toBe("api_key.created");
    expect(verified.data).toMatchObject({ id: key.body.id, role: "agent" });
    expect(JSON.stringify(verified)).not.toContain(key.body.key);
    // A signature made with another secret does not verify.
    const other = `whsec_${Buffer.alloc(32, 7).toString("base64")}`;
    expect(() =>
      new Webhook(other).verify(delivery.body, delivery.headers as Record<string, string>),
    ).toThrow();

    // webhook-id is the event's id; only the key created after the endpoint was sent, not the seed's own.
    const events = await accountEvents(server.api, owner.apiKey);
    expect(events.map((e) => e.type)).toEqual(["api_key.created", "api_key.created"]);
    expect(target.acknowledged()).toEqual([events[1]?.id]);
    expect(Object.keys(JSON.parse(delivery.body))).toEqual(["type", "timestamp", "data"]);
    expect(JSON.parse(delivery.body).timestamp).toBe((events[1] as { createdAt?: string }).createdAt);

    const log = await eventually(async () => {
      const seen = await deliveries(server.api, owner.apiKey, endpoint.id);
      return seen.length > 0 && seen;
    });
    expect(log).toEqual([
      {
        eventId: events[1]?.id,
        attempt: 1,
        status: "succeeded",
        redelivery: false,
        responseStatus: 200,
        at: expect.any(String),
      },
    ]);

    // The secret is in the creation response only: not in the list, the endpoint, the log lines.
    const list = await server.api.get("/v1/webhook-endpoints", owner.apiKey);
    expect(list.status).toBe(200);
    expect(list.body.data).toEqual([
      {
        id: endpoint.id,
        url: target.url,
        events: null,
        description: "all of it",
        createdAt: expect.any(String),
      },
    ]);
    const got = await server.api.get(`/v1/webhook-endpoints/${endpoint.id}`, owner.apiKey);
    expect(got.status).toBe(200);
    expect(got.body).toEqual(list.body.data[0]);
    const secretBody = endpoint.secret.slice("whsec_".length);
    for (const text of [list.text, got.text, server.logs.text()]) {
      expect(text).not.toContain(secretBody);
    }
    // Stored sealed under the master key, bound to its endpoint: neither the secret nor its key bytes in clear.
    const [row] = await selectRows<Record<string, unknown>>(
      server.service.store.db,
      sql`SELECT * FROM webhook_endpoints WHERE id = ${endpoint.id}`,
    );
    const sealed = Buffer.from(row?.sealed_secret as Uint8Array);
    expect(sealed.includes(Buffer.from(secretBody, "base64"))).toBe(false);
    expect(sealed.includes(Buffer.from(endpoint.secret))).toBe(false);
    expect(JSON.stringify(row)).not.toContain(secretBody);
    const keyring = server.service.keyring;
    expect(keyring.openSecret(sealed, `webhook_endpoints:${endpoint.id}`).toString()).toBe(endpoint.secret);
    expect(() => keyring.openSecret(sealed, "webhook_endpoints:wh_another")).toThrow();
  });

  it("retry a failing receiver 5 s, then 30 s, then 2 min later: acknowledged once, every attempt logged, the next event waiting its turn", async () => {
    const target = await receiver();
    let failures = 3;
    target.answer = () => (failures-- > 0 ? 500 : 200);
    const owner = await seedAccount(server.api);
    const wallet = await server.api.post("/v1/wallets", { name: "w", chains: ["base"] }, owner.apiKey);
    const endpoint = await createEndpoint(server.api, owner.apiKey, { url: target.url });
    expect((await patchPolicy(server.api, owner.apiKey, wallet.body.id, { maxPerTx: "1" })).status).toBe(200);
    expect((await patchPolicy(server.api, owner.apiKey, wallet.body.id, { maxPerTx: "2" })).status).toBe(200);
    const events = await eventually(async () => {
      const seen = (await accountEvents(server.api, owner.apiKey)).filter((e) => e.type === "policy.updated");
      return seen.length === 2 && seen;
    });
    const [first, second] = events.map((e) => e.id);

    const logged = (count: number) =>
      eventually(
        async () => {
          const seen = await deliveries(server.api, owner.apiKey, endpoint.id);
          return seen.length >= count && seen;
        },
        { describe: `${count} attempts logged` },
      );
    expect((await logged(1)).map((d) => d.status)).toEqual(["failed"]);
    // Each retry once its delay has passed on the service's clock; the second event waits behind the first.
    for (const [delay, attempts] of [
      [5_000, 2],
      [30_000, 3],
      [120_000, 4],
    ] as const) {
      expect(target.acknowledged()).toEqual([]);
      server.clock.advance(delay);
      await logged(attempts);
    }
    await eventually(() => target.acknowledged().length === 2, { describe: "both events acknowledged" });
    expect(target.requests.map((r) => [r.headers["webhook-id"], r.answered])).toEqual([
      [first, 500],
      [first, 500],
      [first, 500],
      [first, 200],
      [second, 200],
    ]);
    const log = (await logged(5)).reverse();
    expect(log.map((d) => [d.eventId, d.attempt, d.status, d.responseStatus])).toEqual([
      [first, 1, "failed", 500],
      [first, 2, "failed", 500],
      [first, 3, "failed", 500],
      [first, 4, "succeeded", 200],
      [second, 1, "succeeded", 200],
    ]);
    expect(log[0]?.error).toBe("HTTP 500: nope 500");
    // Each retry's time is its delay after the one before, by the service's clock.
    const times = log.map((d) => Date.parse(d.at));
    expect((times[1] ?? 0) - (times[0] ?? 0)).toBeGreaterThanOrEqual(5_000);
    expect((times[2] ?? 0) - (times[1] ?? 0)).toBeGreaterThanOrEqual(30_000);
    expect((times[3] ?? 0) - (times[2] ?? 0)).toBeGreaterThanOrEqual(120_000);
    server.clock.reset();
  });

  it("count a 2xx as delivered without reading its body: a huge one, or one without end, is not a failure", async () => {
    for (const answerBody of ["huge", "endless"] as const) {
      const target = await receiver();
      target.answerBody = answerBody;
      const { owner, endpoint } = await onePolicyEventTo(target);
      // Before, the body was read first: 'larger than 1048576 bytes', or no answer within 10 s, and retried.
      const [first] = await eventually(async () => {
        const log = await deliveries(server.api, owner.apiKey, endpoint.id);
        return log.length > 0 && log;
      });
      expect(first, answerBody).toMatchObject({ attempt: 1, status: "succeeded", responseStatus: 200 });
    }
  });

  it("go out in the order of the events, and only of the types the endpoint asked for; a send on the devnet among them", async () => {
    const everything = await receiver();
    const transactionsOnly = await receiver();
    const owner = await seedAccount(server.api);
    const all = await createEndpoint(server.api, owner.apiKey, { url: everything.url });
    const some = await createEndpoint(server.api, owner.apiKey, {
      url: transactionsOnly.url,
      events: ["transaction.created", "transaction.confirmed"],
    });
    expect(some.events).toEqual(["transaction.created", "transaction.confirmed"]);

    const wallet = await server.api.post("/v1/wallets", { name: "payer", chains: ["base"] }, owner.apiKey);
    const devnet = await sharedDevnet();
    await fundEvm(devnet, wallet.body.evm.address, { eth: 10n ** 18n, usdc: 10_000_000n });
    for (let limit = 1; limit <= 8; limit++) {
      expect(
        (await patchPolicy(server.api, owner.apiKey, wallet.body.id, { dailyLimit: `${limit}0` })).status,
      ).toBe(200);
    }
    const sent = await server.api.post(
      `/v1/wallets/${wallet.body.id}/send`,
      { to: "0x000000000000000000000000000000000000dEaD", amount: "1", chain: "base" },
      owner.apiKey,
    );
    expect(sent.status, sent.text).toBe(201);
    expect((await waitForSettled(server.api, owner.apiKey, sent.body.id)).status).toBe("confirmed");

    await eventually(() => transactionsOnly.acknowledged().length >= 2, {
      describe: "the send's two events",
    });
    const events = await eventually(async () => {
      const seen = await accountEvents(server.api, owner.apiKey);
      return seen.some((e) => e.type === "transaction.confirmed") && seen;
    });
    let allLog: Delivery[] = [];
    await eventually(
      async () => {
        allLog = await deliveries(server.api, owner.apiKey, all.id);
        return everything.acknowledged().length >= events.length - 1;
      },
      {
        describe: () =>
          `every event at the endpoint that takes all: ${JSON.stringify(events.map((e) => e.type))} ${JSON.stringify(allLog)}`,
      },
    );
    // Events committed later (the watcher's receipts of the funding) may follow; these came first, in order.
    // The first is the seed's key, committed before the endpoint: not sent.
    expect(events[0]?.type).toBe("api_key.created");
    const sentEvents = events.slice(1);
    expect(everything.acknowledged().slice(0, sentEvents.length)).toEqual(sentEvents.map((e) => e.id));
    expect(everything.types().filter((t) => t === "policy.updated")).toHaveLength(8);
    const policies = everything.requests
      .map((r) => JSON.parse(r.body))
      .filter((b) => b.type === "policy.updated");
    expect(policies.map((b) => b.data.dailyLimit)).toEqual(["10", "20", "30", "40", "50", "60", "70", "80"]);
    expect(transactionsOnly.types()).toEqual(["transaction.created", "transaction.confirmed"]);
    const confirmed = JSON.parse(transactionsOnly.requests[1]?.body ?? "{}");
    expect(confirmed.data).toMatchObject({ id: sent.body.id, status: "confirmed", txHash: sent.body.txHash });
    expect((await deliveries(server.api, owner.apiKey, some.id)).length).toBe(2);
    expect((await deliveries(server.api, owner.apiKey, all.id)).length).toBeGreaterThanOrEqual(
      events.length - 1,
    );
  });

  it("redeliver sends one event again; deleting an endpoint stops its deliveries", async () => {
    const target = await receiver();
    const { owner, wallet, endpoint } = await onePolicyEventTo(target);
    await eventually(() => target.acknowledged().length === 1, { describe: "the first delivery" });
    const [eventId] = target.acknowledged();

    const again = await server.api.post(
      `/v1/webhook-endpoints/${endpoint.id}/redeliver`,
      { eventId },
      owner.apiKey,
    );
    expect(again.status, again.text).toBe(202);
    expect(again.body).toEqual({ queued: true, eventId });
    await eventually(() => target.acknowledged().length === 2, { describe: "the redelivery" });
    expect(target.acknowledged()).toEqual([eventId, eventId]);
    const log = await eventually(async () => {
      const seen = await deliveries(server.api, owner.apiKey, endpoint.id);
      return seen.length === 2 && seen;
    });
    expect(log.map((d) => [d.attempt, d.status, d.redelivery])).toEqual([
      [2, "succeeded", true],
      [1, "succeeded", false],
    ]);
    // Signed afresh, and it verifies.
    const redelivered = target.requests[1];
    expect(
      new Webhook(endpoint.secret).verify(
        redelivered?.body ?? "",
        redelivered?.headers as Record<string, string>,
      ),
    ).toMatchObject({ type: "policy.updated" });

    // An event the endpoint does not receive, an event of no one, another account's event.
    const keyEvent = (await accountEvents(server.api, owner.apiKey)).find(
      (e) => e.type === "api_key.created",
    );
    const notSubscribed = await server.api.post(
      `/v1/webhook-endpoints/${endpoint.id}/redeliver`,
      { eventId: keyEvent?.id },
      owner.apiKey,
    );
    expect(notSubscribed.status).toBe(409);
    expect(expectErrorShape(notSubscribed).reason).toBe("event_not_subscribed");
    const stranger = await seedAccount(server.api, "stranger");
    // Listed once every transaction older than its own has ended (on PostgreSQL, a moment after the commit).
    const strangersEvent = await eventually(
      async () => (await accountEvents(server.api, stranger.apiKey))[0]?.id,
    );
    for (const id of ["evt_doesnotexist", strangersEvent]) {
      const missing = await server.api.post(
        `/v1/webhook-endpoints/${endpoint.id}/redeliver`,
        { eventId: id },
        owner.apiKey,
      );
      expect(missing.status, missing.text).toBe(404);
    }

    expect((await server.api.delete(`/v1/webhook-endpoints/${endpoint.id}`, owner.apiKey)).status).toBe(204);
    expect((await server.api.delete(`/v1/webhook-endpoints/${endpoint.id}`, owner.apiKey)).status).toBe(204);
    expect((await server.api.get(`/v1/webhook-endpoints/${endpoint.id}`, owner.apiKey)).status).toBe(404);
    expect((await server.api.get("/v1/webhook-endpoints", owner.apiKey)).body.data).toEqual([]);
    // A change after the deletion reaches the event log and no longer the endpoint: a second endpoint,
    // created after it, receives it, and by then the deleted one would have too.
    const witness = await receiver();
    await createEndpoint(server.api, owner.apiKey, { url: witness.url, events: ["policy.updated"] });
    expect((await patchPolicy(server.api, owner.apiKey, wallet.body.id, { maxPerTx: "4" })).status).toBe(200);
    await eventually(() => witness.acknowledged().length === 1, { describe: "the witness's delivery" });
    await new Promise((resolve) => setTimeout(resolve, 3 * server.config.webhookPollMs));
    expect(target.requests).toHaveLength(2);
  });

  it(`queue at most ${MAX_QUEUED_REDELIVERIES} redeliveries per endpoint: asked for at once, the rest are 409 too_many_redeliveries`, async () => {
    const target = await receiver();
    target.delayMs = 30_000; // the endpoint is busy: nothing leaves the queue meanwhile
    const { owner, endpoint } = await onePolicyEventTo(target);
    await eventually(() => target.arrived === 1, { describe: "the first delivery, left unanswered" });
    const [event] = await accountEvents(server.api, owner.apiKey).then((all) =>
      all.filter((e) => e.type === "policy.updated"),
    );

    const answers = await Promise.all(
      Array.from({ length: MAX_QUEUED_REDELIVERIES + 3 }, () =>
        server.api.post(
          `/v1/webhook-endpoints/${endpoint.id}/redeliver`,
          { eventId: event?.id },
          owner.apiKey,
        ),
      ),
    );
    expect(answers.filter((a) => a.status === 202)).toHaveLength(MAX_QUEUED_REDELIVERIES);
    const refused = answers.filter((a) => a.status !== 202);
    expect(refused).toHaveLength(3);
    for (const answer of refused) {
      expect(answer.status).toBe(409);
      expect(expectErrorShape(answer)).toMatchObject({
        reason: "too_many_redeliveries",
        details: { max: MAX_QUEUED_REDELIVERIES },
      });
    }
    // Deleting the endpoint drops its queue: a new endpoint does not start with room taken, nor the old
    // queue stay behind for good.
    expect((await server.api.delete(`/v1/webhook-endpoints/${endpoint.id}`, owner.apiKey)).status).toBe(204);
    const left = await selectRows<{ n: number }>(
      server.service.store.db,
      sql`SELECT count(*)::int AS n FROM webhook_redeliveries WHERE endpoint_id = ${endpoint.id}`,
    );
    expect(left).toEqual([{ n: 0 }]);
  });

  it("give an event up 3 days after its first attempt, log it, and go on to the next", async () => {
    const target = await receiver();
    const owner = await seedAccount(server.api);
    const wallet = await server.api.post("/v1/wallets", { name: "w", chains: ["base"] }, owner.apiKey);
    // The receiver refuses the first event, whenever it comes, and takes the second.
    let next: string | undefined;
    target.answer = ({ headers }) => (next !== undefined && headers["webhook-id"] === next ? 204 : 503);
    const endpoint = await createEndpoint(server.api, owner.apiKey, { url: target.url });
    expect((await patchPolicy(server.api, owner.apiKey, wallet.body.id, { maxPerTx: "5" })).status).toBe(200);
    expect((await patchPolicy(server.api, owner.apiKey, wallet.body.id, { maxPerTx: "6" })).status).toBe(200);
    const [doomed, second] = await eventually(async () => {
      const seen = (await accountEvents(server.api, owner.apiKey)).filter((e) => e.type === "policy.updated");
      return seen.length === 2 && seen.map((e) => e.id);
    });
    next = second;
    // Each retry's delay passes on the clock, until the next would fall more than 3 days after the first.
    let attempts = 0;
    for (;;) {
      const seen = await eventually(async () => {
        const log = await deliveries(server.api, owner.apiKey, endpoint.id);
        return log.length > attempts && log;
      });
      attempts = seen.length;
      if (seen.some((d) => d.status === "gave_up")) break;
      expect(seen[0]?.status).toBe("failed");
      expect(attempts).toBeLessThan(30);
      server.clock.advance(RETRY_DELAYS_MS[attempts - 1] ?? 12 * 3600_000);
    }
    // 5 s, 30 s, 2 min, 10 min, 30 min, 1 h, 2 h, 4 h, 8 h, 12 h, then 12 h: the 14th attempt is the last.
    const doomedAttempts = (await deliveries(server.api, owner.apiKey, endpoint.id)).filter(
      (d) => d.eventId === doomed,
    );
    expect(doomedAttempts.map((d) => d.attempt)).toEqual(Array.from({ length: 14 }, (_, i) => 14 - i));
    await eventually(() => target.acknowledged().length === 1, { describe: "the second event" });
    expect(target.acknowledged()).toEqual([next]);
    const log = await eventually(async () => {
      const seen = await deliveries(server.api, owner.apiKey, endpoint.id);
      return seen.length === 15 && seen;
    });
    const [given, ...failed] = log.slice(1);
    expect(given?.eventId).toBe(doomed);
    expect(failed.every((d) => d.eventId === doomed)).toBe(true);
    expect(given?.status).toBe("gave_up");
    expect(failed.every((d) => d.status === "failed" && d.responseStatus === 503)).toBe(true);
    expect(Date.parse(given?.at ?? "") - Date.parse(log.at(-1)?.at ?? "")).toBeLessThan(3 * 24 * 3600_000);
    expect(log[0]).toMatchObject({ status: "succeeded", attempt: 1, responseStatus: 204 });
    expect(log[0]?.eventId).not.toBe(given?.eventId);
    expect(server.logs.text()).toContain("webhook delivery given up");
    server.clock.reset();
  });
});

describe("webhook delivery slots", () => {
  it("are signed with a rotated secret at once, and with the one it replaced too until that expires", async () => {
    const target = await receiver();
    const { owner, wallet, endpoint } = await onePolicyEventTo(target);
    await eventually(() => target.acknowledged().length === 1, { describe: "the first delivery" });
    // Whether one of the delivery's signatures is `secret`'s (the verifier's own clock would refuse the
    // timestamps of deliveries made once the service's clock is moved on).
    const verifies = (secret: string, delivery: Received | undefined) => {
      if (!delivery) throw new Error("no delivery");
      const id = String(delivery.headers["webhook-id"]);
      const at = new Date(Number(delivery.headers["webhook-timestamp"]) * 1000);
      const expected = new Webhook(secret).sign(id, at, delivery.body);
      return String(delivery.headers["webhook-signature"]).split(" ").includes(expected);
    };
    const rotate = (body?: Record<string, unknown>) =>
      server.api.post(`/v1/webhook-endpoints/${endpoint.id}/rotate-secret`, body, owner.apiKey);
    const nextDelivery = async (maxPerTx: string) => {
      const before = target.requests.length;
      expect((await patchPolicy(server.api, owner.apiKey, wallet.body.id, { maxPerTx })).status).toBe(200);
      await eventually(() => target.requests.length > before, { describe: "the next delivery" });
      return target.requests.at(-1);
    };

    const rotated = await rotate({ previousSecretValidForSeconds: 3600 });
    expect(rotated.status, rotated.text).toBe(200);
    expect(rotated.body).toMatchObject({ id: endpoint.id, url: target.url });
    expect(rotated.body.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(rotated.body.secret).not.toBe(endpoint.secret);
    expect(Date.parse(rotated.body.previousSecretExpiresAt) - Date.now()).toBeGreaterThan(3500_000);
    // The endpoint as read never shows a secret, old or new.
    const read = await server.api.get(`/v1/webhook-endpoints/${endpoint.id}`, owner.apiKey);
    expect(read.text).not.toContain(endpoint.secret);
    expect(read.text).not.toContain(rotated.body.secret);

    const during = await nextDelivery("4");
    expect(verifies(rotated.body.secret, during)).toBe(true);
    expect(verifies(endpoint.secret, during)).toBe(true);
    // An hour on, the replaced secret signs no more.
    server.clock.advance(3600_000 + 1000);
    try {
      const after = await nextDelivery("5");
      expect(verifies(rotated.body.secret, after)).toBe(true);
      expect(verifies(endpoint.secret, after)).toBe(false);
    } finally {
      server.clock.reset();
    }

    // A leaked secret is dropped at once: 0 keeps none beside the new one.
    const urgent = await rotate({ previousSecretValidForSeconds: 0 });
    expect(urgent.status, urgent.text).toBe(200);
    expect(urgent.body.previousSecretExpiresAt).toBeNull();
    const now = await nextDelivery("6");
    expect(verifies(urgent.body.secret, now)).toBe(true);
    expect(verifies(rotated.body.secret, now)).toBe(false);

    // Only an admin of the account rotates: an agent key is refused, another account sees no such endpoint.
    const agent = await server.api.post("/v1/api-keys", { name: "bot", role: "agent" }, owner.apiKey);
    expect(
      (await server.api.post(`/v1/webhook-endpoints/${endpoint.id}/rotate-secret`, undefined, agent.body.key))
        .status,
    ).toBe(403);
    const stranger = await seedAccount(server.api);
    const hidden = await server.api.post(
      `/v1/webhook-endpoints/${endpoint.id}/rotate-secret`,
      undefined,
      stranger.apiKey,
    );
    expect(hidden.status, hidden.text).toBe(404);
    expect((await rotate({ previousSecretValidForSeconds: 8 * 86_400 })).status).toBe(400);
  });

  it("are signed with the secret as it stands at each attempt: a rotation counts from the next attempt on", async () => {
    // A receiver that holds its first request until told, while the events after it wait in the same batch.
    let letGo = () => {};
    const held = new Promise<void>((resolve) => {
      letGo = resolve;
    });
    const got: Received[] = [];
    const target = createServer(async (request, response) => {
      let body = "";
      for await (const chunk of request) body += chunk;
      if (got.length === 0) {
        got.push({ headers: request.headers, body, answered: 200 });
        await held;
      } else got.push({ headers: request.headers, body, answered: 200 });
      response.writeHead(200).end("ok");
    });
    await new Promise<void>((resolve) => target.listen(0, "127.0.0.1", resolve));
    try {
      const owner = await seedAccount(server.api);
      const wallet = await server.api.post("/v1/wallets", { name: "w", chains: ["base"] }, owner.apiKey);
      const endpoint = await createEndpoint(server.api, owner.apiKey, {
        url: `http://127.0.0.1:${(target.address() as AddressInfo).port}/hooks`,
        events: ["policy.updated"],
      });
      for (const maxPerTx of ["3", "4"])
        expect((await patchPolicy(server.api, owner.apiKey, wallet.body.id, { maxPerTx })).status).toBe(200);
      await eventually(() => got.length === 1, { describe: "the first delivery, held" });
      const rotated = await server.api.post(
        `/v1/webhook-endpoints/${endpoint.id}/rotate-secret`,
        { previousSecretValidForSeconds: 0 },
        owner.apiKey,
      );
      expect(rotated.status, rotated.text).toBe(200);
      letGo();
      await eventually(() => got.length === 2, { describe: "the second delivery" });
      const second = got[1] as Received;
      const signature = (secret: string) =>
        new Webhook(secret).sign(
          String(second.headers["webhook-id"]),
          new Date(Number(second.headers["webhook-timestamp"]) * 1000),
          second.body,
        );
      expect(String(second.headers["webhook-signature"]).split(" ")).toEqual([
        signature(rotated.body.secret),
      ]);
    } finally {
      letGo();
      target.closeAllConnections();
      await new Promise((resolve) => target.close(resolve));
    }
  });

  it("are shared: one account's endpoints, their receivers hanging, hold at most a quarter of an instance's slots", async () => {
    // The other account, ready before the busy one's queue starts: only its event comes later.
    const quick = await receiver();
    const other = await seedAccount(server.api);
    await createEndpoint(server.api, other.apiKey, { url: quick.url, events: ["api_key.created"] });

    // An account with more endpoints than an instance works at once, at a receiver that holds every request
    // open until the attempt times out, each with a queue of redeliveries. Each hanging attempt held its slot
    // for the whole timeout: 16 of them held every slot, and every other account's deliveries waited.
    const hanging = await receiver();
    hanging.delayMs = 60_000;
    const busy = await seedAccount(server.api);
    const endpoints = [];
    for (let i = 0; i < 17; i++)
      endpoints.push(await createEndpoint(server.api, busy.apiKey, { url: hanging.url }));
    const [event] = await accountEvents(server.api, busy.apiKey);
    for (let round = 0; round < 3; round++)
      for (const endpoint of endpoints) {
        const queued = await server.api.post(
          `/v1/webhook-endpoints/${endpoint.id}/redeliver`,
          { eventId: event?.id },
          busy.apiKey,
        );
        expect(queued.status, queued.text).toBe(202);
      }
    await eventually(() => hanging.open >= 4, { describe: "the busy account's endpoints being worked" });

    const key = await server.api.post("/v1/api-keys", { name: "k", role: "read" }, other.apiKey);
    expect(key.status, key.text).toBe(201);
    await eventually(() => quick.acknowledged().length === 1, { describe: "the other account's delivery" });
    expect(hanging.mostOpen).toBe(4);
  });
});

describe("webhook endpoints", () => {
  it("are an admin's: an agent key is refused 403, another account's endpoint is 404", async () => {
    const owner = await seedAccount(server.api);
    const target = await receiver();
    const endpoint = await createEndpoint(server.api, owner.apiKey, { url: target.url });
    const agent = await server.api.post("/v1/api-keys", { name: "a", role: "agent" }, owner.apiKey);
    const path = `/v1/webhook-endpoints/${endpoint.id}`;
    for (const [method, url, body] of [
      ["POST", "/v1/webhook-endpoints", { url: target.url }],
      ["GET", "/v1/webhook-endpoints", undefined],
      ["GET", path, undefined],
      ["GET", `${path}/deliveries`, undefined],
      ["POST", `${path}/redeliver`, { eventId: "evt_abc" }],
      ["DELETE", path, undefined],
    ] as const) {
      const refused = await server.api.request(method, url, {
        token: agent.body.key,
        ...(body ? { body } : {}),
      });
      expect(refused.status, `${method} ${url}`).toBe(403);
      expect(expectErrorShape(refused).reason).toBe("insufficient_role");
    }
    const stranger = await seedAccount(server.api, "stranger");
    for (const [method, url, body] of [
      ["GET", path, undefined],
      ["GET", `${path}/deliveries`, undefined],
      ["POST", `${path}/redeliver`, { eventId: "evt_abc" }],
      ["DELETE", path, undefined],
    ] as const) {
      const hidden = await server.api.request(method, url, {
        token: stranger.apiKey,
        ...(body ? { body } : {}),
      });
      expect(hidden.status, `${method} ${url}`).toBe(404);
    }
    expect((await server.api.get("/v1/webhook-endpoints", stranger.apiKey)).body.data).toEqual([]);
    expect((await server.api.get(path, owner.apiKey)).status).toBe(200);
  });

  it("take http(s) URLs and known event types only", async () => {
    const owner = await seedAccount(server.api);
    for (const body of [
      { url: "ftp://example.com/hook" },
      { url: "not a url" },
      { url: "https://user:pw@example.com/hook" },
      // Port 0 reaches nothing: every delivery would fail, and be retried for days.
      { url: "https://example.com:0/hook" },
      { url: "https://example.com/hook", events: ["transaction.exploded"] },
      { url: "https://example.com/hook", events: [] },
      { url: "https://example.com/hook", secret: "whsec_mine" },
      {},
    ]) {
      const refused = await server.api.post("/v1/webhook-endpoints", body, owner.apiKey);
      expect(refused.status, JSON.stringify(body)).toBe(400);
      expectErrorShape(refused);
    }
  });
});

describe("webhooks and the outbound guard", () => {
  it("refuse a private target unless SVC_OUTBOUND_ALLOW exempts it, by address and by what a name resolves to, at creation", async () => {
    const strict = await createTestServer({ env: { SVC_OUTBOUND_ALLOW: "10.255.255.0/24" } });
    try {
      const target = await receiver();
      const owner = await seedAccount(strict.api);
      for (const url of [
        target.url,
        target.url.replace("127.0.0.1", "localhost"),
        "http://10.0.0.1/hook",
        "http://[::1]:80/hook",
        "http://169.254.169.254/latest",
      ]) {
        const refused = await strict.api.post("/v1/webhook-endpoints", { url }, owner.apiKey);
        expect(refused.status, url).toBe(400);
        expect(expectErrorShape(refused), url).toMatchObject({ reason: "destination_not_allowed" });
      }
      const byName = await strict.api.post(
        "/v1/webhook-endpoints",
        { url: target.url.replace("127.0.0.1", "localhost") },
        owner.apiKey,
      );
      // What a name resolves to is told, never the address (no oracle for internal names).
      const { message } = expectErrorShape(byName);
      expect(message).toContain("resolves to a loopback address");
      expect(message).not.toContain("127.0.0.1");
      expect((await strict.api.get("/v1/webhook-endpoints", owner.apiKey)).body.data).toEqual([]);
      expect(target.requests).toEqual([]);
    } finally {
      await strict.close();
    }
  });

  it("refuse the service's own backends at creation, though loopback is exempt (as on the devnet)", async () => {
    const owner = await seedAccount(server.api);
    const devnet = await sharedDevnet();
    for (const url of [devnet.evm.rpcUrl, devnet.solana.rpcUrl, `${server.url}/v1/wallets`]) {
      // Also as IPv6 forms that carry the IPv4 address: mapped, NAT64 (64:ff9b::/96) and 6to4 (2002::/16).
      for (const form of [
        url,
        url.replace("127.0.0.1", "localhost"),
        url.replace("127.0.0.1", "[::ffff:127.0.0.1]"),
        url.replace("127.0.0.1", "[64:ff9b::127.0.0.1]"),
        url.replace("127.0.0.1", "[2002:7f00:1::]"),
      ]) {
        const refused = await server.api.post("/v1/webhook-endpoints", { url: form }, owner.apiKey);
        expect(refused.status, form).toBe(400);
        const error = expectErrorShape(refused);
        expect(error, form).toMatchObject({
          reason: "destination_not_allowed",
          details: { kind: "backend" },
        });
        // Before, the service's own URL was said to be "a chain's RPC endpoint or the authorization daemon".
        expect(error.message, form).toContain("it is this service itself or one of its own backends");
      }
    }
  });

  it("take a name that does not resolve yet: each delivery checks it again, and records its failure", async () => {
    const owner = await seedAccount(server.api);
    const endpoint = await createEndpoint(server.api, owner.apiKey, {
      url: "https://hooks.svc-test.invalid/in",
    });
    await server.api.post("/v1/api-keys", { name: "k", role: "read" }, owner.apiKey);
    const log = await eventually(async () => {
      const seen = await deliveries(server.api, owner.apiKey, endpoint.id);
      return seen.length > 0 && seen;
    });
    expect(log[0]).toMatchObject({ attempt: 1, status: "failed", responseStatus: null });
    expect(log[0]?.error).toContain("hooks.svc-test.invalid");
  });
});

describe("webhook delivery across restarts and instances", () => {
  it("a receiver down across a service restart still gets every event, in order", async () => {
    const dir = mkdtempSync(join(tmpdir(), "svc-webhooks-"));
    const target = await receiver();
    let up = false;
    target.answer = () => (up ? 200 : 503);
    const store = { pgliteDir: join(dir, "pg") };
    unpackInitializedPglite(store.pgliteDir);
    let first: TestServer | undefined = await createTestServer({ store });
    let second: TestServer | undefined;
    try {
      const owner = await seedAccount(first.api);
      const wallet = await first.api.post("/v1/wallets", { name: "w", chains: ["base"] }, owner.apiKey);
      const endpoint = await createEndpoint(first.api, owner.apiKey, { url: target.url });
      for (const maxPerTx of ["1", "2", "3"])
        expect((await patchPolicy(first.api, owner.apiKey, wallet.body.id, { maxPerTx })).status).toBe(200);
      await eventually(
        async () => (await deliveries(first?.api as ApiClient, owner.apiKey, endpoint.id)).length > 0,
      );
      await first.close();
      first = undefined;

      second = await createTestServer({ store });
      const api = second.api;
      for (const maxPerTx of ["4", "5"])
        expect((await patchPolicy(api, owner.apiKey, wallet.body.id, { maxPerTx })).status).toBe(200);
      up = true;
      // The retry is due 5 s after the first attempt, by the clock.
      second.clock.advance(5_000);
      await eventually(() => target.acknowledged().length === 5, { describe: "all five events" });
      const events = (await accountEvents(api, owner.apiKey)).filter((e) => e.type === "policy.updated");
      expect(target.acknowledged()).toEqual(events.map((e) => e.id));
      const bodies = target.requests.filter((r) => r.answered === 200).map((r) => JSON.parse(r.body));
      expect(bodies.map((b) => b.data.maxPerTx)).toEqual(["1", "2", "3", "4", "5"]);
    } finally {
      await first?.close();
      await second?.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("two instances on one PostgreSQL deliver each event once", async () => {
    const database = await createFreshDatabase(
      process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test",
    );
    const one = await createTestServer({ store: { databaseUrl: database.url } });
    const two = await createTestServer({ store: { databaseUrl: database.url } });
    try {
      const targets = [await receiver(), await receiver(), await receiver()];
      const owner = await seedAccount(one.api);
      const wallet = await one.api.post("/v1/wallets", { name: "w", chains: ["base"] }, owner.apiKey);
      const endpoints: { id: string }[] = [];
      for (const target of targets)
        endpoints.push(await createEndpoint(two.api, owner.apiKey, { url: target.url }));
      const changes = 20;
      await Promise.all(
        Array.from({ length: changes }, (_, i) =>
          patchPolicy(i % 2 ? one.api : two.api, owner.apiKey, wallet.body.id, { maxPerTx: String(i + 1) }),
        ),
      );
      const events = await eventually(async () => {
        const seen = (await accountEvents(one.api, owner.apiKey)).filter((e) => e.type === "policy.updated");
        return seen.length === changes && seen;
      });
      for (const [index, target] of targets.entries()) {
        await eventually(() => target.acknowledged().length >= changes, { describe: `receiver ${index}` });
        const log = await eventually(async () => {
          const seen = await deliveries(one.api, owner.apiKey, endpoints[index]?.id ?? "");
          return seen.length >= changes && seen;
        });
        expect(log.every((d) => d.attempt === 1 && d.status === "succeeded")).toBe(true);
      }
      // Long enough for a second instance's duplicate to arrive, were there one.
      await new Promise((resolve) => setTimeout(resolve, 5 * one.config.webhookPollMs));
      for (const target of targets) {
        expect(target.requests.map((r) => r.headers["webhook-id"])).toEqual(events.map((e) => e.id));
      }
    } finally {
      await one.close();
      await two.close();
      await database.drop();
    }
  });
});
