/**
 * The console in a real browser against a started service: registering, the session across a reload,
 * logging out (a duplicated tab on the same session ends at its next read), a wrong password's error, and
 * logging in while someone else guesses at the email.
 */
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestServer, type TestServer } from "../../server/test/support/test-server.ts";
import { APPROVALS_POLL_MS } from "../src/polls.ts";
import { type ConsoleUser, openUser, registerThroughConsole } from "./support/browser.ts";

let server: TestServer;
let user: ConsoleUser;
const email = `owner-${randomBytes(4).toString("hex")}@example.com`;
const password = "correct-horse-battery-staple";

beforeAll(async () => {
  // A low login limit: the last test has someone else use up the email's attempts.
  server = await createTestServer({ env: { SVC_LOGIN_LIMIT_PER_MINUTE: "5" } });
  user = await openUser(server.url);
});
afterAll(async () => {
  await user?.close();
  await server?.close();
});

describe("the session", () => {
  it("registers, lands on an empty wallets page, and keeps the session across a reload", async () => {
    const { page } = user;
    await registerThroughConsole(user, email, password);
    await page.getByText("No wallets yet").waitFor();
    await page.reload();
    await page.getByRole("heading", { name: "Wallets" }).waitFor();
    expect(await page.getByText(email).isVisible()).toBe(true);
    expect(user.errors).toEqual([]);
    await user.screenshot("session-registered");
  });

  it("logs out, ending the token (a copy of it stops working), and a wrong password shows the service's message and request id", async () => {
    const { page } = user;
    const copied = await page.evaluate(() => {
      for (let i = 0; i < sessionStorage.length; i++) {
        const match = /"accessToken":"([^"]+)"/.exec(
          sessionStorage.getItem(sessionStorage.key(i) ?? "") ?? "",
        );
        if (match) return match[1];
      }
      return undefined;
    });
    expect(copied).toBeTruthy();
    expect((await server.api.get("/v1/wallets", copied)).status).toBe(200);
    await page.getByRole("button", { name: "Log out" }).click();
    await page.getByLabel("Email").waitFor();
    const after = await server.api.get("/v1/wallets", copied);
    expect(after.status).toBe(401);
    expect(after.body.error.reason).toBe("token_ended");
    await page.getByLabel("Email").fill(email);
    await page.getByLabel("Password").fill("not-the-password-at-all");
    await page.getByRole("button", { name: "Log in" }).last().click();
    const alert = page.getByRole("alert");
    await alert.waitFor();
    expect(await alert.textContent()).toMatch(/Invalid email or password/i);
    expect(await alert.textContent()).toMatch(/Request id req_/);
    await user.screenshot("session-wrong-password");
    // The right password gets in.
    await page.getByLabel("Password").fill(password);
    await page.getByRole("button", { name: "Log in" }).last().click();
    await page.getByRole("heading", { name: "Wallets" }).waitFor();
  });

  it("sends a tab left open on the same session (a duplicated tab) to the login page at its next read once the owner logged out in another", async () => {
    const { page } = user;
    await page.getByRole("heading", { name: "Wallets" }).waitFor();
    const session = await page.evaluate(() => sessionStorage.getItem("svc.console.session"));
    expect(session).toContain("accessToken");
    // A duplicated tab starts with a copy of its tab's sessionStorage.
    const stale = await page.context().newPage();
    try {
      await stale.addInitScript((copied) => {
        if (!sessionStorage.getItem("svc.console.session"))
          sessionStorage.setItem("svc.console.session", copied);
      }, session as string);
      await stale.goto("/#/approvals");
      await stale.getByText("Nothing waiting for you.").waitFor();
      await page.getByRole("button", { name: "Log out" }).click();
      await page.getByLabel("Email").waitFor();
      // The queue reads itself again within seconds (its clock moved to that read): refused, the tab ends its
      // session and shows why.
      await stale.clock.fastForward(APPROVALS_POLL_MS);
      await stale.getByText("Your session has ended. Log in again.").waitFor({ timeout: 15_000 });
      expect(await stale.getByRole("heading", { name: "Approvals" }).count()).toBe(0);
      expect(await stale.evaluate(() => sessionStorage.getItem("svc.console.session"))).toBeNull();
    } finally {
      await stale.close();
    }
    await page.getByLabel("Email").fill(email);
    await page.getByLabel("Password").fill(password);
    await page.getByRole("button", { name: "Log in" }).last().click();
    await page.getByRole("heading", { name: "Wallets" }).waitFor();
  });

  it("logs the owner in from this browser while someone else's guesses have the email limited, and only from it", async () => {
    const { page } = user;
    await page.getByRole("button", { name: "Log out" }).click();
    await page.getByLabel("Email").waitFor();
    const guesses = [];
    for (let i = 0; i < 6; i++)
      guesses.push(
        (await server.api.post("/v1/auth/login", { email, password: "someone-guessing-it" })).status,
      );
    expect(guesses.at(-1)).toBe(429);

    // This browser logged in to the email before: its login is counted for it, not for the email.
    await page.getByLabel("Email").fill(email);
    await page.getByLabel("Password").fill(password);
    await page.getByRole("button", { name: "Log in" }).last().click();
    await page.getByRole("heading", { name: "Wallets" }).waitFor();

    // A browser that never logged in to it waits, with the service's message.
    const stranger = await openUser(server.url);
    try {
      await stranger.page.getByLabel("Email").fill(email);
      await stranger.page.getByLabel("Password").fill(password);
      await stranger.page.getByRole("button", { name: "Log in" }).last().click();
      const alert = stranger.page.getByRole("alert");
      await alert.waitFor();
      expect(await alert.textContent()).toMatch(/Too many login attempts for this email/);
      await stranger.screenshot("session-email-limited");
    } finally {
      await stranger.close();
    }
  });
});
