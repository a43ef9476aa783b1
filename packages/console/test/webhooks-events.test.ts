/**
 * Webhooks and the event feed at the console: an endpoint registered in the console receives signed
 * events (its secret, shown once, verifies them) and lists its deliveries; the Events page shows a new
 * event without a reload; a new secret, shown once, signs beside the old one for a day, or alone; deleting
 * the endpoint asks first.
 */
import { randomBytes } from "node:crypto";
import { verifyWebhook } from "@svc/sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../../../test/support/eventually.ts";
import { createTestServer, type TestServer } from "../../server/test/support/test-server.ts";
import { WebhookReceiver } from "../../server/test/support/webhook-receiver.ts";
import { EVENTS_POLL_MS } from "../src/polls.ts";
import { type ConsoleUser, openUser, registerThroughConsole } from "./support/browser.ts";

let server: TestServer;
let owner: ConsoleUser;
const email = `hooks-${randomBytes(4).toString("hex")}@example.com`;
const password = "correct-horse-battery-staple";
/** Where the service delivers; it answers 204. */
let receiver: WebhookReceiver;
/** What the receiver got: raw body and headers of each delivery. */
let received: { body: string; headers: Record<string, string> }[];
let receiverUrl: string;

beforeAll(async () => {
  receiver = await new WebhookReceiver().listen();
  receiver.answer = () => 204;
  received = receiver.requests as typeof received;
  receiverUrl = receiver.url;
  server = await createTestServer();
  owner = await openUser(server.url);
});
afterAll(async () => {
  await owner?.close();
  await server?.close();
  await receiver?.close();
});

describe("webhooks and events at the console", () => {
  let token: string;
  let secret: string;

  it("registers an endpoint for chosen events; its secret, shown once, verifies what it receives", async () => {
    const { page } = owner;
    await registerThroughConsole(owner, email, password);
    token = (await server.api.post("/v1/auth/login", { email, password })).body.accessToken as string;
    await page.getByRole("link", { name: "Webhooks" }).click();
    await page.getByText("No endpoints.").waitFor();
    await page.getByRole("textbox", { name: "URL" }).fill(receiverUrl);
    await page.getByRole("checkbox", { name: "wallet.archived" }).check();
    await page.getByRole("button", { name: "Add endpoint" }).click();
    await page.getByRole("heading", { name: "Endpoint created" }).waitFor();
    secret = (await page.locator(".secret code").textContent()) as string;
    expect(secret).toMatch(/^whsec_/);
    await page.getByRole("listitem", { name: receiverUrl }).waitFor();
    expect(owner.errors.join("\n")).toBe("");
    await owner.screenshot("webhooks-1-created");

    // An event of the chosen type reaches the endpoint, signed with that secret.
    const wallet = (await server.api.post("/v1/wallets", { name: "old", chains: ["base"] }, token)).body;
    expect((await server.api.delete(`/v1/wallets/${wallet.id}`, token)).status).toBeLessThan(300);
    await eventually(() => received.length > 0, { describe: "a delivery" });
    const delivery = received[0] as (typeof received)[number];
    const event = verifyWebhook(delivery.body, delivery.headers, secret);
    expect(event).toMatchObject({ type: "wallet.archived", data: { id: wallet.id, name: "old" } });

    // The secret is not on the page after a reload; the deliveries are.
    await page.reload();
    const card = page.getByRole("listitem", { name: receiverUrl });
    await card.waitFor();
    expect(await page.content()).not.toContain(secret);
    await card.getByRole("button", { name: "Recent deliveries" }).click();
    await card
      .getByRole("table", { name: "Deliveries" })
      .getByRole("row", { name: /succeeded.*HTTP 204/ })
      .waitFor();
    await owner.screenshot("webhooks-2-deliveries");
  });

  it("shows a new event in the feed without a reload", async () => {
    const { page } = owner;
    await page.getByRole("link", { name: "Events" }).click();
    const feed = page.getByRole("list", { name: "Events, newest first" });
    await feed.getByText("wallet “old” archived").waitFor();
    expect(owner.errors.join("\n")).toBe("");
    // Something happens elsewhere: it appears at the top.
    await server.api.post("/v1/api-keys", { name: "late agent", role: "agent" }, token);
    await page.clock.fastForward(EVENTS_POLL_MS);
    await feed.getByText("key “late agent” created (agent)").waitFor({ timeout: 10_000 });
    expect(await feed.getByRole("listitem").first().textContent()).toContain("late agent");
    // An event about a wallet links to it by its name (it said "wallet"), one made since the page loaded too.
    await feed.getByRole("link", { name: "old", exact: true }).first().waitFor();
    const late = (await server.api.post("/v1/wallets", { name: "late wallet", chains: ["base"] }, token))
      .body;
    expect((await server.api.delete(`/v1/wallets/${late.id}`, token)).status).toBeLessThan(300);
    await page.clock.fastForward(EVENTS_POLL_MS);
    const lateLink = feed.getByRole("link", { name: "late wallet", exact: true });
    await lateLink.waitFor({ timeout: 10_000 });
    expect(await feed.getByRole("link", { name: "wallet", exact: true }).count()).toBe(0);
    // The filter shows one type only.
    await page.getByRole("combobox", { name: "Type" }).selectOption("wallet.archived");
    await feed.getByText("wallet “late wallet” archived").waitFor();
    expect(await feed.getByRole("listitem").count()).toBe(2);
    await owner.screenshot("events-1-feed");
  });

  it("gives the endpoint a new secret, shown once: the old one signs beside it for a day, or stops at once", async () => {
    const { page } = owner;
    await page.getByRole("link", { name: "Webhooks" }).click();
    const card = page.getByRole("listitem", { name: receiverUrl });
    /** Archives a wallet, and returns the delivery of its event. */
    const nextDelivery = async () => {
      const before = received.length;
      const wallet = (await server.api.post("/v1/wallets", { name: "rotated", chains: ["base"] }, token))
        .body;
      expect((await server.api.delete(`/v1/wallets/${wallet.id}`, token)).status).toBeLessThan(300);
      await eventually(() => received.length > before, { describe: "a delivery" });
      return received[received.length - 1] as (typeof received)[number];
    };
    const rotate = async (choice: RegExp) => {
      await card.getByRole("button", { name: "New secret…" }).click();
      await card.getByRole("radio", { name: choice }).check();
      await card.getByRole("button", { name: "Make a new secret" }).click();
      const shown = page.getByRole("status").filter({ hasText: `New secret for ${receiverUrl}` });
      await shown.waitFor();
      const rotated = (await shown.locator(".secret code").textContent()) as string;
      expect(rotated).toMatch(/^whsec_/);
      expect(owner.errors.join("\n")).toBe("");
      return { rotated, shown };
    };

    // For a day, as chosen by default: a delivery verifies with the new secret, and still with the old.
    const first = await rotate(/for a day/);
    expect(first.rotated).not.toBe(secret);
    await expect(first.shown.textContent()).resolves.toMatch(/old secret's signature too until/);
    await owner.screenshot("webhooks-3-new-secret");
    let delivery = await nextDelivery();
    expect(verifyWebhook(delivery.body, delivery.headers, first.rotated)).toMatchObject({
      type: "wallet.archived",
    });
    expect(verifyWebhook(delivery.body, delivery.headers, secret)).toMatchObject({ type: "wallet.archived" });
    await first.shown.getByRole("button", { name: "I have copied it" }).click();

    // At once, for a leaked secret: the one it replaced signs nothing more.
    const second = await rotate(/Stop the old secret now/);
    await expect(second.shown.textContent()).resolves.toMatch(/old secret no longer signs/);
    delivery = await nextDelivery();
    expect(verifyWebhook(delivery.body, delivery.headers, second.rotated)).toMatchObject({
      type: "wallet.archived",
    });
    expect(() => verifyWebhook(delivery.body, delivery.headers, first.rotated)).toThrow();
    await second.shown.getByRole("button", { name: "I have copied it" }).click();
    await page.reload();
    await card.waitFor();
    expect(await page.content()).not.toContain(second.rotated);
  });

  it("deletes the endpoint after a confirmation", async () => {
    const { page } = owner;
    await page.getByRole("link", { name: "Webhooks" }).click();
    const card = page.getByRole("listitem", { name: receiverUrl });
    await card.getByRole("button", { name: "Delete…" }).click();
    await card.getByRole("button", { name: `Delete ${receiverUrl}` }).click();
    await page.getByText("No endpoints.").waitFor();
    expect((await server.api.get("/v1/webhook-endpoints", token)).body.data ?? []).toEqual([]);
    expect(owner.errors.join("\n")).toBe("");
  });
});
