/**
 * The owner's day in a real browser, against a started service on the local chains: register, create a
 * wallet, fund it from the faucet, see the balance, set a daily limit (a bad value answered at its field),
 * then an agent key spends above the approval threshold through the API, the request appears in Approvals
 * without a reload, the owner approves, and the wallet's history shows it confirmed and counted against
 * the limit. Then pause / resume and archiving with a confirmation; a phone-width view.
 */
import { randomBytes } from "node:crypto";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestServer, type TestServer } from "../../server/test/support/test-server.ts";
import { PENDING_BADGE_POLL_MS } from "../src/polls.ts";
import { type ConsoleUser, openUser, registerThroughConsole } from "./support/browser.ts";

let server: TestServer;
let owner: ConsoleUser;
let page: Page;
const email = `owner-${randomBytes(4).toString("hex")}@example.com`;
const password = "correct-horse-battery-staple";
let walletId: string;
/** The wallet page's URL, to come back to it. */
let walletUrl: string;

beforeAll(async () => {
  server = await createTestServer();
  owner = await openUser(server.url);
  page = owner.page;
});
afterAll(async () => {
  await owner?.close();
  await server?.close();
});

/** An input of the policy editor by its label (other elements mention the same words). */
const bound = (name: RegExp) => page.getByRole("textbox", { name });

describe("an owner at the console", () => {
  it("registers, creates a wallet and funds it from the faucet; the balance shows it", async () => {
    await registerThroughConsole(owner, email, password);
    expect(owner.errors.join("\n")).toBe("");
    await page.getByRole("button", { name: "Create wallet" }).click();
    await page.getByRole("textbox", { name: "Name" }).fill("research agent");
    await page.getByRole("button", { name: "Create", exact: true }).click();
    await page.getByRole("heading", { name: /research agent/ }).waitFor();
    walletUrl = page.url();
    walletId = decodeURIComponent(walletUrl.split("#/wallets/")[1] as string);
    expect(walletId).toMatch(/^wal_/);

    await page.getByRole("combobox", { name: "Token" }).selectOption("USDC");
    await page.getByRole("button", { name: "Request test coins" }).click();
    await page.getByText("Received 100.00 USDC on base.").waitFor({ timeout: 60_000 });
    const balances = page.getByRole("table", { name: "Balances" });
    await balances.getByRole("row", { name: /base\s+100\.00 USDC/ }).waitFor();
    // Gas for the agent's sends later.
    await page.getByRole("combobox", { name: "Token" }).selectOption("ETH");
    await page.getByRole("button", { name: "Request test coins" }).click();
    await page.getByText("Received 1.00 ETH on base.").waitFor({ timeout: 60_000 });
    await balances.getByRole("row", { name: /base\s+1\.00 ETH/ }).waitFor();
    // The receive is in the history, confirmed, with its hash.
    const history = page.getByRole("table", { name: "Transactions" });
    await history.getByRole("row", { name: /receive.*\+100\.00 USDC.*confirmed/ }).waitFor();
    expect(owner.errors.join("\n")).toBe("");
    await owner.screenshot("owner-1-funded");
  });

  it("sets a daily limit; a bad value gets the service's message at its field", async () => {
    await bound(/^Daily limit/).fill("-5");
    await page.getByRole("button", { name: "Save policy" }).click();
    const fieldMessage = page.locator("#dailyLimit-hint.field-error");
    await fieldMessage.waitFor();
    expect((await fieldMessage.textContent())?.length).toBeGreaterThan(0);
    expect(await bound(/^Daily limit/).getAttribute("aria-invalid")).toBe("true");
    // The request id of the refusal is there to quote.
    expect(await page.getByRole("alert").first().textContent()).toMatch(/Request id req_/);
    await owner.screenshot("owner-2-bad-limit");
    // Chromium logs the refused request itself ("Failed to load resource: … 400"); nothing else was logged.
    expect(owner.errors).toEqual([expect.stringMatching(/^Failed to load resource: .* 400/)]);
    owner.errors.length = 0;

    await bound(/^Daily limit/).fill("50");
    await bound(/^Approval above/).fill("5");
    await page.getByRole("button", { name: "Save policy" }).click();
    await page.getByText("Policy saved.").waitFor();
    const policy = await server.api.get(`/v1/wallets/${walletId}/policy`, await accessToken());
    expect(policy.body).toMatchObject({ dailyLimit: "50", approvalAbove: "5" });
    await page
      .locator("figcaption")
      .getByText(/\$0\.00 of \$50\.00 used in the last 24 h/)
      .waitFor();
  });

  it("saving the whitelist keeps a change made elsewhere since the page loaded: an entry removed there stays removed", async () => {
    const token = await accessToken();
    const [kept, removedElsewhere, added] = [
      "0x1111111111111111111111111111111111111111",
      "0x2222222222222222222222222222222222222222",
      "api.example.com",
    ];
    const setWhitelist = (whitelist: string[]) =>
      server.api.request("PATCH", `/v1/wallets/${walletId}/policy`, { token, body: { whitelist } });
    expect((await setWhitelist([kept, removedElsewhere])).status).toBe(200);
    await page.goto(walletUrl);
    await page.reload();
    await page.getByRole("button", { name: `Remove ${removedElsewhere} from the whitelist` }).waitFor();
    // Elsewhere (another tab, the CLI) the entry is removed; this page still shows it.
    expect((await setWhitelist([kept])).status).toBe(200);
    await page.getByRole("textbox", { name: "Add an address or host" }).fill(added);
    await page.getByRole("button", { name: "Add", exact: true }).click();
    await page.getByRole("button", { name: "Save policy" }).click();
    await page.getByText("Policy saved.").waitFor();
    const policy = await server.api.get(`/v1/wallets/${walletId}/policy`, token);
    expect(policy.body.whitelist).toEqual([kept, added]);
    expect((await setWhitelist([])).status).toBe(200);
    await page.reload();
  });

  it("an agent's spend above the approval threshold appears in Approvals without a reload; approved, it confirms", async () => {
    await page.getByRole("link", { name: /^Approvals/ }).click();
    await page.getByText("Nothing waiting for you.").waitFor();

    // The agent, through the API, with a key bound to this wallet.
    const token = await accessToken();
    const agentKey = (
      await server.api.post("/v1/api-keys", { name: "agent", role: "agent", walletIds: [walletId] }, token)
    ).body.key as string;
    const payee = "0x000000000000000000000000000000000000dEaD";
    const held = await server.api.post(
      `/v1/wallets/${walletId}/send`,
      { to: payee, amount: "10", token: "USDC", chain: "base" },
      agentKey,
    );
    expect(held.status, held.text).toBe(202);
    expect(held.body.status).toBe("pending_approval");
    // The queue's and the navigation's next reads, now (the badge's interval is the longer one).
    await page.clock.fastForward(PENDING_BADGE_POLL_MS);

    const card = page.getByRole("listitem", { name: /10\.00 USDC to 0x00000000/ });
    await card.waitFor({ timeout: 10_000 });
    expect(await card.textContent()).toContain("research agent");
    // The payee in full, group by group: a look-alike address cannot pass for it.
    expect(await card.textContent()).toContain("0x0000 0000 0000 0000 0000 0000 0000 0000 0000 dEaD");
    await page.getByRole("link", { name: /Approvals\s*1/ }).waitFor({ timeout: 10_000 });
    expect(owner.errors.join("\n")).toBe("");
    await owner.screenshot("owner-3-approval-waiting");
    // The page's clock stands still: what changes now is the approval's doing, not a poll's.
    await page.clock.pauseAt(await page.evaluate(() => Date.now() + 1));
    await card.getByRole("button", { name: "Approve" }).click();
    await page.getByText("Nothing waiting for you.").waitFor();
    // The navigation's count, read again at once (it polls every 5 s): no spend is waiting.
    await page.getByRole("link", { name: "Approvals", exact: true }).waitFor({ timeout: 10_000 });
    await page.clock.resume();

    // The wallet page: the send, confirmed on chain, counted against the limit.
    await page.goto(walletUrl);
    const history = page.getByRole("table", { name: "Transactions" });
    await history.getByRole("row", { name: /send.*−10\.00 USDC.*confirmed/ }).waitFor({ timeout: 30_000 });
    await page
      .locator("figcaption")
      .getByText(/\$10\.00 of \$50\.00 used in the last 24 h; \$40\.00 left/)
      .waitFor({ timeout: 20_000 });
    const sent = await server.api.get(`/v1/transactions/${held.body.id}`, token);
    expect(sent.body).toMatchObject({ status: "confirmed", amount: "10" });
    // The chart's bar holding the spend names an hour (to the minute) that the spend was made in.
    const barTitles = await page.locator("svg.spending-chart rect.bar title").allTextContents();
    const bar = barTitles.find((title) => title.endsWith(": $10.00")) as string;
    const [from, to] = [...bar.matchAll(/(\d+):(\d+) (AM|PM)/g)].map(
      ([, h, m, half]) => ((Number(h) % 12) + (half === "PM" ? 12 : 0)) * 60 + Number(m),
    ) as [number, number];
    const made = new Date(sent.body.timestamp as string);
    const madeAt = made.getUTCHours() * 60 + made.getUTCMinutes();
    const within = from <= to ? from <= madeAt && madeAt <= to : madeAt >= from || madeAt <= to;
    expect(within, `${bar} holds a spend made at ${made.toISOString()}`).toBe(true);
    expect(await history.textContent()).toContain((sent.body.txHash as string).slice(0, 8));
    // Beside the send's amount, the fee it paid as the API states it (a fee of ETH, below 1, has the
    // digits the console writes: no grouping, at least two decimals); the receives paid none and show none.
    const fee = sent.body.fee as { amount: string; token: string };
    expect(fee).toEqual({ amount: expect.stringMatching(/^0\.\d{2,}$/), token: "ETH" });
    const sendAmount = history.locator(`tr[data-transaction="${held.body.id}"] td.amount`);
    expect(await sendAmount.getByText(`fee ${fee.amount} ETH`, { exact: true }).count()).toBe(1);
    const receives = history.getByRole("row").filter({ hasText: /^receive on base/ });
    expect(await receives.count()).toBe(2);
    for (const text of await receives.allTextContents()) expect(text).not.toContain("fee");
    // The events feed says it of the send's confirmation; no other event states a fee (the spend's request
    // and approval came before it landed, the faucet's receives paid none).
    await page.getByRole("link", { name: "Events" }).click();
    const feed = page.getByRole("list", { name: "Events, newest first" });
    await feed
      .getByRole("listitem")
      .filter({ hasText: "transaction.confirmed" })
      .getByText(`send of 10.00 USDC to 0x00000000…dEaD on base (fee ${fee.amount} ETH)`, { exact: true })
      .waitFor();
    const others = feed.getByRole("listitem").filter({ hasNotText: "transaction.confirmed" });
    for (const text of await others.allTextContents()) expect(text).not.toContain("fee");
    await page.goto(walletUrl);
    // The filters: sends only, then receives on base only; the pager counts what matches.
    const historySection = page.getByRole("region", { name: "History" });
    await historySection.getByRole("combobox", { name: "Type" }).selectOption("send");
    await page.getByText("1–1 of 1").waitFor();
    expect(await history.getByRole("row").count()).toBe(2); // the header and the send
    await historySection.getByRole("combobox", { name: "Type" }).selectOption("receive");
    await historySection.getByRole("combobox", { name: "Chain" }).selectOption("base");
    await page.getByText("1–2 of 2").waitFor();
    expect(await history.textContent()).not.toContain("−10.00 USDC");
    await historySection.getByRole("combobox", { name: "Chain" }).selectOption("solana");
    await page.getByText("No transactions match these filters.").waitFor();
    await historySection.getByRole("combobox", { name: "Type" }).selectOption("");
    await historySection.getByRole("combobox", { name: "Chain" }).selectOption("");
    await page.getByText("1–3 of 3").waitFor();
    expect(owner.errors.join("\n")).toBe("");
    await owner.screenshot("owner-4-confirmed");
  });

  it("pauses and resumes spending, reads well at phone width, archives after a confirmation, and restores", async () => {
    await page.getByRole("button", { name: "Pause spending" }).click();
    await page.getByRole("button", { name: "Resume spending" }).waitFor();
    const token = await accessToken();
    expect((await server.api.get(`/v1/wallets/${walletId}/policy`, token)).body.status).toBe("paused");
    // The list says so too (it said "active").
    await page.getByRole("link", { name: "Wallets", exact: true }).click();
    const card = page
      .getByRole("list", { name: "Wallets" })
      .getByRole("listitem")
      .filter({ hasText: "research agent" });
    await card.getByText("paused", { exact: true }).waitFor();
    await card.getByRole("link", { name: "research agent" }).click();
    await page.getByRole("button", { name: "Resume spending" }).click();
    await page.getByRole("button", { name: "Pause spending" }).waitFor();
    expect((await server.api.get(`/v1/wallets/${walletId}/policy`, token)).body.status).toBe("active");

    await page.setViewportSize({ width: 390, height: 844 });
    // Nothing wider than the screen but the tables, which scroll inside their own box.
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    const wide = await page.evaluate(() =>
      [...document.querySelectorAll("body *")]
        .filter(
          (el) => el.getBoundingClientRect().right > window.innerWidth + 1 && !el.closest(".table-wrap"),
        )
        .map((el) => `${el.tagName}.${el.className}`)
        .slice(0, 10),
    );
    expect(overflow, wide.join(", ")).toBeLessThanOrEqual(0);
    await owner.screenshot("owner-5-phone");
    await page.setViewportSize({ width: 1280, height: 900 });

    await page.getByRole("button", { name: "Archive wallet…" }).click();
    const dialog = page.getByRole("dialog", { name: /Archive “research agent”\?/ });
    await dialog.waitFor();
    await dialog.getByRole("button", { name: "Cancel" }).click();
    expect((await server.api.get(`/v1/wallets/${walletId}`, token)).body.status).toBe("active");
    await page.getByRole("button", { name: "Archive wallet…" }).click();
    await dialog.getByRole("button", { name: "Archive research agent" }).click();
    await page.getByRole("heading", { name: /research agent\s+archived/ }).waitFor();
    expect((await server.api.get(`/v1/wallets/${walletId}`, token)).body.status).toBe("archived");
    expect(await page.getByRole("button", { name: "Request test coins" }).count()).toBe(0);
    expect(owner.errors.join("\n")).toBe("");
    await owner.screenshot("owner-6-archived");

    // The owner's way back.
    await page.getByRole("button", { name: "Restore wallet" }).click();
    await page.getByRole("heading", { name: /research agent\s+active/ }).waitFor();
    expect((await server.api.get(`/v1/wallets/${walletId}`, token)).body.status).toBe("active");
    await page.getByRole("button", { name: "Archive wallet…" }).waitFor();
    expect(owner.errors.join("\n")).toBe("");
  });
});

/** An admin credential of the owner, for checking through the API what the console did. */
async function accessToken(): Promise<string> {
  const login = await server.api.post("/v1/auth/login", { email, password });
  return login.body.accessToken as string;
}
