import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { fundEvm } from "@svc/devnet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../../../test/support/eventually.ts";
import {
  SvcForbiddenError,
  SvcNotFoundError,
  SvcValidationError,
  SvcWebhookVerificationError,
  verifyWebhook,
  type WebhookEvent,
} from "../src/index.ts";
import { ETH, sharedDevnet, startWorld, USDC, type World } from "./support.ts";

/**
 * A real HTTP receiver on 127.0.0.1 that checks every delivery with `verifyWebhook` and the endpoint's
 * secret, as a user's would: 204 for a verified one, 400 for anything else.
 */
class VerifyingReceiver {
  secret = "";
  readonly verified: { id: string; event: WebhookEvent }[] = [];
  readonly refused: string[] = [];
  readonly #server: Server;
  url = "";

  constructor() {
    this.#server = createServer(async (request, response) => {
      let body = "";
      for await (const chunk of request) body += chunk;
      try {
        const event = verifyWebhook(body, request.headers, this.secret);
        this.verified.push({ id: String(request.headers["webhook-id"]), event });
        response.writeHead(204).end();
      } catch (error) {
        this.refused.push(
          error instanceof SvcWebhookVerificationError ? String(error.reason) : String(error),
        );
        response.writeHead(400).end();
      }
    });
  }

  async listen(): Promise<this> {
    await new Promise<void>((resolve) => this.#server.listen(0, "127.0.0.1", resolve));
    this.url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}/hooks/svc`;
    return this;
  }

  close(): Promise<void> {
    this.#server.closeAllConnections();
    return new Promise((resolve) => this.#server.close(() => resolve()));
  }
}

let world: World;
let receiver: VerifyingReceiver;

beforeAll(async () => {
  world = await startWorld();
  receiver = await new VerifyingReceiver().listen();
});
afterAll(async () => {
  await world.close();
  await receiver.close();
});

describe("svc.webhooks and verifyWebhook against the service's deliveries", () => {
  it("an endpoint receives its event types, each verified with the secret shown once; deliveries are logged; redeliver sends one again; delete stops it", async () => {
    const endpoint = await world.admin.webhooks.create({
      url: receiver.url,
      events: ["approval.requested", "approval.rejected"],
      description: "owner's phone",
    });
    expect(endpoint).toMatchObject({
      url: receiver.url,
      events: ["approval.requested", "approval.rejected"],
      description: "owner's phone",
    });
    expect(endpoint.secret).toMatch(/^whsec_/);
    receiver.secret = endpoint.secret;
    const listed = (await world.admin.webhooks.list()).find((e) => e.id === endpoint.id);
    expect(listed).toMatchObject({ url: receiver.url });
    expect(listed).not.toHaveProperty("secret");
    expect(await world.admin.webhooks.get(endpoint.id)).not.toHaveProperty("secret");

    const wallet = await world.admin.wallet.create({
      name: "hooked",
      chains: ["base"],
      policy: { approvalAbove: "5" },
    });
    await fundEvm(await sharedDevnet(), wallet.evm?.address as `0x${string}`, { eth: ETH, usdc: 20n * USDC });
    const held = await wallet.send({
      to: "0x000000000000000000000000000000000000dEaD",
      amount: 7,
      token: "USDC",
      chain: "base",
    });
    await world.admin.approvals.reject(held.id);

    const delivered = await eventually(() => receiver.verified.length >= 2 && receiver.verified, {
      describe: () => `two verified deliveries; refused: ${receiver.refused.join(", ")}`,
    });
    expect(receiver.refused).toEqual([]);
    expect(delivered.map(({ event }) => event.type)).toEqual(["approval.requested", "approval.rejected"]);
    const [requested, rejected] = delivered;
    expect(requested?.event.data).toMatchObject({ id: held.id, status: "pending_approval" });
    expect(rejected?.event.data).toMatchObject({ id: held.id, status: "rejected" });
    // webhook-id is the event's id in the log.
    const logged = await world.admin.events.list({
      walletId: wallet.id,
      type: ["approval.requested", "approval.rejected"],
    });
    expect(delivered.map(({ id }) => id)).toEqual(logged.data.map((event) => event.id));

    const attempts = await eventually(async () => {
      const rows = await world.admin.webhooks.deliveries(endpoint.id);
      return rows.length >= 2 && rows;
    });
    expect(attempts).toHaveLength(2);
    expect(attempts.every((a) => a.status === "succeeded" && a.responseStatus === 204 && !a.redelivery)).toBe(
      true,
    );

    const again = requested?.id as string;
    await world.admin.webhooks.redeliver(endpoint.id, again);
    await eventually(() => receiver.verified.length >= 3);
    expect(receiver.verified[2]).toMatchObject({ id: again, event: { type: "approval.requested" } });
    const redelivered = await eventually(async () => {
      const rows = await world.admin.webhooks.deliveries(endpoint.id, { eventId: again });
      return rows.length >= 2 && rows;
    });
    expect(redelivered.map((a) => a.redelivery).sort()).toEqual([false, true]);

    // An event of a type the endpoint does not receive.
    const created = (await world.admin.events.list({ walletId: wallet.id, type: "transaction.created" }))
      .data[0];
    const unsubscribed = await world.admin.webhooks
      .redeliver(endpoint.id, created?.id as string)
      .catch((e) => e);
    expect(unsubscribed).toBeInstanceOf(SvcValidationError);
    expect(unsubscribed.reason).toBe("event_not_subscribed");

    await world.admin.webhooks.delete(endpoint.id);
    expect((await world.admin.webhooks.list()).map((e) => e.id)).not.toContain(endpoint.id);
    expect(await world.admin.webhooks.get(endpoint.id).catch((e) => e)).toBeInstanceOf(SvcNotFoundError);
  });

  it("rotateSecret gives a new secret; the replaced one verifies until it expires, at once with 0", async () => {
    const endpoint = await world.admin.webhooks.create({ url: receiver.url, events: ["policy.updated"] });
    const wallet = await world.admin.wallet.create({ name: "rotating", chains: ["base"] });
    const deliveredWith = async (secret: string, maxPerTx: string) => {
      receiver.secret = secret;
      const [verified, refused] = [receiver.verified.length, receiver.refused.length];
      await wallet.policy.update({ maxPerTx });
      await eventually(() => receiver.verified.length > verified || receiver.refused.length > refused, {
        describe: "the delivery",
      });
      return receiver.verified.length > verified;
    };

    const rotated = await world.admin.webhooks.rotateSecret(endpoint.id, {
      previousSecretValidForSeconds: 3600,
    });
    expect(rotated.secret).toMatch(/^whsec_/);
    expect(rotated.secret).not.toBe(endpoint.secret);
    expect(Date.parse(rotated.previousSecretExpiresAt ?? "")).toBeGreaterThan(Date.now());
    // A receiver not told the new secret yet still verifies; one told does too.
    expect(await deliveredWith(endpoint.secret, "3")).toBe(true);
    expect(await deliveredWith(rotated.secret, "4")).toBe(true);

    const urgent = await world.admin.webhooks.rotateSecret(endpoint.id, { previousSecretValidForSeconds: 0 });
    expect(urgent.previousSecretExpiresAt).toBeNull();
    expect(await deliveredWith(rotated.secret, "5")).toBe(false);
    receiver.refused.length = 0;
    await world.admin.webhooks.delete(endpoint.id);
  });

  it("an agent key cannot register an endpoint (SvcForbiddenError)", async () => {
    const wallet = await world.admin.wallet.create({ name: "agent's", chains: ["base"] });
    const { key } = await world.admin.apiKeys.create({
      name: "agent",
      role: "agent",
      walletIds: [wallet.id],
    });
    const agent = world.client({ apiKey: key });
    const error = await agent.webhooks.create({ url: receiver.url }).catch((e) => e);
    expect(error).toBeInstanceOf(SvcForbiddenError);
    expect(error.status).toBe(403);
  });
});
