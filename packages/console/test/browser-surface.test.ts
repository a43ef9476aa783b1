/**
 * The browser side as someone hostile meets it, in a real browser: what others write into the console
 * (wallet and key names, a webhook endpoint's URL and description, set through the API by anyone holding an
 * admin credential of the account: an agent's key, a script) is shown as text on every page that shows it,
 * no markup made of it, no script run, no link out of the console; a page of another origin can neither
 * frame the console nor read the API with the owner's token, and one whose name is rebound to the service's
 * address reads nothing; and the API's documentation page at /docs renders under its
 * Content-Security-Policy without a violation.
 */
import { randomBytes } from "node:crypto";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { fundEvm } from "@svc/devnet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestServer, sharedDevnet, type TestServer } from "../../server/test/support/test-server.ts";
import { type ConsoleUser, launch, openUser, registerThroughConsole } from "./support/browser.ts";

let server: TestServer;
let owner: ConsoleUser;
const email = `hostile-${randomBytes(4).toString("hex")}@example.com`;
const password = "correct-horse-battery-staple";

/** Markup that, were it ever parsed as HTML, would set `window.ran`. */
const MARKUP = `<img src=x onerror="window.ran='img'"><script>window.ran='script'</script>`;
const SCRIPT_URL = "javascript:window.ran='link'";

beforeAll(async () => {
  server = await createTestServer();
  owner = await openUser(server.url);
});
afterAll(async () => {
  await owner?.close();
  await server?.close();
});

/** What on the page could run or lead elsewhere: markup made of the strings, and every link's target. */
async function inertness() {
  return owner.page.evaluate(() => ({
    ran: (window as { ran?: string }).ran,
    made: document.querySelectorAll("#root img, #root script, #root iframe, #root object").length,
    links: [...document.querySelectorAll("#root a")]
      .map((a) => a.getAttribute("href") ?? "")
      .filter((href) => !href.startsWith("#/")),
  }));
}

describe("the browser side", () => {
  it("shows names, URLs and descriptions set through the API as text on every page: nothing runs, no link leaves", async () => {
    const { page } = owner;
    const dialogs: string[] = [];
    page.on("dialog", (dialog) => {
      dialogs.push(dialog.message());
      void dialog.dismiss();
    });
    await registerThroughConsole(owner, email, password);
    const token = (await server.api.post("/v1/auth/login", { email, password })).body.accessToken as string;

    // A wallet named with markup holds a spend for approval; another, named like a script link, is archived.
    const wallet = await server.api.post(
      "/v1/wallets",
      { name: MARKUP, chains: ["base"], policy: { approvalAbove: "1" } },
      token,
    );
    expect(wallet.status, wallet.text).toBe(201);
    await fundEvm(await sharedDevnet(), wallet.body.evm.address, { eth: 10n ** 18n, usdc: 100n * 10n ** 6n });
    const held = await server.api.post(
      `/v1/wallets/${wallet.body.id}/send`,
      { to: "0x000000000000000000000000000000000000dEaD", amount: "5", token: "USDC", chain: "base" },
      token,
    );
    expect(held.body.status, held.text).toBe("pending_approval");
    const archived = await server.api.post("/v1/wallets", { name: SCRIPT_URL, chains: ["base"] }, token);
    expect((await server.api.delete(`/v1/wallets/${archived.body.id}`, token)).status).toBeLessThan(300);
    expect((await server.api.post("/v1/api-keys", { name: MARKUP, role: "read" }, token)).status).toBe(201);
    const endpoint = await server.api.post(
      "/v1/webhook-endpoints",
      { url: `http://127.0.0.1:9/"><img src=x onerror="window.ran='url'">`, description: MARKUP },
      token,
    );
    expect(endpoint.status, endpoint.text).toBe(201);

    for (const [view, shown] of [
      ["/wallets", MARKUP],
      [`/wallets/${wallet.body.id}`, MARKUP],
      ["/approvals", MARKUP],
      ["/api-keys", MARKUP],
      ["/webhooks", MARKUP],
      ["/events", `key “${MARKUP}” created`],
      ["/events", `wallet “${SCRIPT_URL}” archived`],
    ] as const) {
      // Loaded afresh: a view already open would show what it read before.
      await page.goto(`/#${view}`);
      await page.reload();
      await page.getByText(shown, { exact: false }).first().waitFor();
      expect(await inertness(), view).toEqual({ ran: undefined, made: 0, links: [] });
    }
    await page.goto("/#/webhooks");
    await page.getByRole("listitem", { name: endpoint.body.url }).waitFor();
    expect(endpoint.body.url).not.toContain("<img");
    expect(await inertness()).toEqual({ ran: undefined, made: 0, links: [] });
    expect(dialogs).toEqual([]);
    expect(owner.errors.join("\n")).toBe("");
    await owner.screenshot("browser-hostile-webhooks");
  });

  it("lets a page of another origin neither frame the console (to steer a click on Approve or Revoke) nor read the API with the owner's token", async () => {
    const { page } = owner;
    const token = (await server.api.post("/v1/auth/login", { email, password })).body.accessToken as string;
    const console = `${server.url}/#/approvals`;
    // Another origin: another port.
    const other = createServer((_request, response) => {
      response.setHeader("content-type", "text/html; charset=utf-8");
      response.end(`<!doctype html><title>elsewhere</title><iframe src="${console}"></iframe>`);
    });
    await new Promise<void>((resolve) => other.listen(0, "127.0.0.1", resolve));
    try {
      const { port } = other.address() as AddressInfo;
      await page.goto(`http://127.0.0.1:${port}/`);
      const framed = page.frames().filter((frame) => frame !== page.mainFrame());
      expect(framed.length).toBe(1);
      // Refused by the console's frame-ancestors 'none': the frame holds the browser's error page.
      expect(framed[0]?.url()).not.toContain(server.url);
      expect(owner.errors.join("\n")).toMatch(/frame-ancestors 'none'/);
      owner.errors.length = 0;
      const answer = await page.evaluate(
        async ([url, bearer]) => {
          try {
            const response = await fetch(url as string, { headers: { authorization: `Bearer ${bearer}` } });
            return `read: ${response.status} ${await response.text()}`;
          } catch {
            return "refused";
          }
        },
        [`${server.url}/v1/wallets`, token],
      );
      // No CORS answer lets the browser send the token from here, let alone hand back the answer.
      expect(answer).toBe("refused");
    } finally {
      await new Promise((resolve) => other.close(resolve));
      owner.errors.length = 0;
    }
  });

  it("lets a page whose name is rebound to the service's address (DNS rebinding) read nothing of it, nor register", async () => {
    const port = new URL(server.url).port;
    const origin = `http://rebinder.example:${port}`;
    // The name resolves to the service's address, as an attacker's DNS answers once the page has loaded.
    // Chromium's own Local Network Access checks would stop the page's requests; other browsers have none,
    // so they are off here, and what is tested is the service's own refusal.
    const browser = await launch([
      `--host-resolver-rules=MAP rebinder.example 127.0.0.1`,
      "--disable-features=LocalNetworkAccessChecks,BlockInsecurePrivateNetworkRequests",
    ]);
    try {
      const page = await browser.newPage();
      // The page itself came from the attacker's server, before the name was rebound.
      await page.route(`${origin}/`, (route) =>
        route.fulfill({ contentType: "text/html", body: "<!doctype html><title>rebinder</title>" }),
      );
      await page.goto(`${origin}/`);
      const answers = await page.evaluate(async () => {
        const register = await fetch("/v1/auth/register", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ email: "rebound@example.com", password: "correct-horse-battery-staple" }),
        });
        const health = await fetch("/healthz");
        return [
          { status: register.status, body: await register.json() },
          { status: health.status, body: await health.json() },
        ];
      });
      // Same origin as far as the browser knows, so it hands the answers over: the service gave away nothing.
      for (const answer of answers) {
        expect(answer.status).toBe(403);
        expect(answer.body.error.reason).toBe("host_not_allowed");
      }
      const login = await server.api.post("/v1/auth/login", {
        email: "rebound@example.com",
        password: "correct-horse-battery-staple",
      });
      expect(login.status).toBe(401);
    } finally {
      await browser.close();
    }
  });

  it("renders the API's documentation at /docs without a Content-Security-Policy violation", async () => {
    const { page } = owner;
    owner.errors.length = 0;
    await page.goto("/docs");
    await page.getByText("/v1/auth/login").first().waitFor();
    await page.getByText("Svc wallet service").first().waitFor();
    // Swagger UI's top bar drew its logo with an inline <style>, which the CSP refused: an error each visit.
    expect(owner.errors.join("\n")).toBe("");
    await owner.screenshot("browser-docs");
  });

  it("renders /docs reached with a query (a link's tracking tag, Swagger's own ?url=) as without one", async () => {
    const { page } = owner;
    for (const path of ["/docs/?utm_source=readme", "/docs?url=https://elsewhere.example/spec.json"]) {
      owner.errors.length = 0;
      await page.goto(path);
      // Swagger UI fetched its document from the page's URL with the query in it: the page, not the spec.
      await page.getByText("/v1/auth/login").first().waitFor({ timeout: 15_000 });
      expect(owner.errors.join("\n"), path).toBe("");
    }
  });
});
