/**
 * API keys at the console: an agent key bound to one chosen wallet is shown once, works for that wallet
 * only, is nowhere on the page once copied nor after a reload, and stops working when revoked.
 */
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestServer, type TestServer } from "../../server/test/support/test-server.ts";
import { type ConsoleUser, openUser, registerThroughConsole } from "./support/browser.ts";

let server: TestServer;
let owner: ConsoleUser;
const email = `keys-${randomBytes(4).toString("hex")}@example.com`;
const password = "correct-horse-battery-staple";

beforeAll(async () => {
  server = await createTestServer();
  owner = await openUser(server.url);
});
afterAll(async () => {
  await owner?.close();
  await server?.close();
});

describe("API keys at the console", () => {
  it("creates an agent key bound to a chosen wallet, shows it once, and revokes it", async () => {
    const { page } = owner;
    await registerThroughConsole(owner, email, password);
    const token = (await server.api.post("/v1/auth/login", { email, password })).body.accessToken as string;
    const create = (name: string) => server.api.post("/v1/wallets", { name, chains: ["base"] }, token);
    const mine = (await create("shopping")).body;
    const other = (await create("savings")).body;

    await page.getByRole("link", { name: "API keys" }).click();
    await page.getByText("No API keys yet").waitFor();
    expect(owner.errors.join("\n")).toBe("");
    await page.getByRole("textbox", { name: "Key name" }).fill("shopping agent");
    await page.getByRole("radio", { name: /^Agent/ }).check();
    await page.getByRole("checkbox", { name: "shopping" }).check();
    await page.getByRole("button", { name: "Create key" }).click();
    await page.getByRole("heading", { name: "Key “shopping agent” created" }).waitFor();
    const key = (await page.locator(".secret code").textContent()) as string;
    expect(key).toMatch(/^svc_[A-Za-z0-9]{32,}$/);
    await page.getByRole("button", { name: "Copy key" }).click();
    await page.getByRole("button", { name: "Copied" }).waitFor();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(key);
    // Copied, it leaves the page at once: not in the document, its address or its title.
    await page.getByRole("button", { name: "I have copied it" }).click();
    await page.getByRole("heading", { name: "Key “shopping agent” created" }).waitFor({ state: "detached" });
    expect(await page.content()).not.toContain(key);
    expect(`${page.url()} ${await page.title()}`).not.toContain(key);
    const row = page.getByRole("table", { name: "API keys" }).getByRole("row", { name: /shopping agent/ });
    expect(await row.textContent()).toMatch(/agent.*shopping.*never/);
    await owner.screenshot("keys-1-created");

    // The key works for its wallet only, as an agent.
    expect((await server.api.get(`/v1/wallets/${mine.id}`, key)).status).toBe(200);
    expect((await server.api.get(`/v1/wallets/${other.id}`, key)).status).toBe(404);
    const listed = (await server.api.get("/v1/api-keys", token)).body;
    expect(listed.data ?? listed).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ name: "shopping agent", role: "agent", walletIds: [mine.id] }),
      ]),
    );

    // After a reload the value is gone from the page; the key is still listed.
    await page.reload();
    await row.waitFor();
    expect(await page.content()).not.toContain(key);
    expect(await page.evaluate(() => JSON.stringify({ ...sessionStorage, ...localStorage }))).not.toContain(
      key,
    );

    await row.getByRole("button", { name: "Revoke shopping agent…" }).click();
    await row.getByRole("button", { name: "Revoke shopping agent now" }).click();
    await page.getByText("No API keys yet").waitFor();
    expect((await server.api.get(`/v1/wallets/${mine.id}`, key)).status).toBe(401);
    expect(owner.errors.join("\n")).toBe("");
    await owner.screenshot("keys-2-revoked");
  });
});
