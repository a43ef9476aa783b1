/**
 * A real headless Chromium for the console's tests. On Linux x64 it is the build shipped inside the npm
 * package `@sparticuz/chromium` (nothing to install beyond `npm install`); elsewhere, or to use another
 * build, `CHROMIUM_PATH` names the executable.
 *
 * `@sparticuz/chromium` runs `--single-process`, where every context of one browser shares storage: each
 * user of a test gets a browser of their own ({@link openUser}).
 */
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import chromium from "@sparticuz/chromium";
import { type Browser, type Page, chromium as playwright } from "playwright-core";

/** Where each flow's screenshot goes (CI keeps the directory); `SVC_SCREENSHOT_DIR` moves it. */
export const SCREENSHOT_DIR =
  process.env.SVC_SCREENSHOT_DIR ?? fileURLToPath(new URL("../../test-results/screenshots", import.meta.url));

/**
 * Flags among `@sparticuz/chromium`'s own that turn off what the console's tests check: with
 * `--disable-web-security` the same-origin policy is off (a page of another origin read the API's answers,
 * CORS or not), and mixed content is let through.
 */
const WEAKENED_SECURITY = new Set(["--disable-web-security", "--allow-running-insecure-content"]);

/**
 * A new browser; `args` are further Chromium flags (`--host-resolver-rules=…`, say). Features they turn off
 * are turned off beside the build's own (Chromium reads only one `--disable-features`).
 */
export async function launch(args: string[] = []): Promise<Browser> {
  const configured = process.env.CHROMIUM_PATH;
  if (configured) return playwright.launch({ executablePath: configured, args, headless: true });
  if (process.platform !== "linux" || process.arch !== "x64") {
    throw new Error(
      "@sparticuz/chromium ships a Linux x64 build only: set CHROMIUM_PATH to a Chromium or Chrome executable",
    );
  }
  return playwright.launch({
    executablePath: await chromium.executablePath(),
    args: withFeaturesMerged([...chromium.args.filter((arg) => !WEAKENED_SECURITY.has(arg)), ...args]),
    headless: true,
  });
}

const DISABLE_FEATURES = "--disable-features=";

function withFeaturesMerged(args: string[]): string[] {
  const disabled = args
    .filter((arg) => arg.startsWith(DISABLE_FEATURES))
    .flatMap((arg) => arg.slice(DISABLE_FEATURES.length).split(","));
  const rest = args.filter((arg) => !arg.startsWith(DISABLE_FEATURES));
  return disabled.length > 0 ? [...rest, `${DISABLE_FEATURES}${disabled.join(",")}`] : rest;
}

/** One person at the console: their own browser, one page, and what the page printed as an error. */
export interface ConsoleUser {
  page: Page;
  /** Console errors and uncaught exceptions the page has had so far (CSP violations included). */
  errors: string[];
  /** Saves a full-page screenshot as `<name>.png` in {@link SCREENSHOT_DIR}. */
  screenshot(name: string): Promise<string>;
  close(): Promise<void>;
}

/**
 * Opens the console of the service at `baseUrl` in a new browser. The browser's clock is Playwright's
 * (`page.clock`), installed before the console loads: it runs in real time, and a test that waits for a
 * poll (src/polls.ts) moves it forward by the poll's interval instead of waiting it out.
 * @example
 * const owner = await openUser(server.url, { width: 1280, height: 900 });
 * await owner.page.getByRole("tab", { name: "Register" }).click();
 */
export async function openUser(
  baseUrl: string,
  viewport: { width: number; height: number } = { width: 1280, height: 900 },
): Promise<ConsoleUser> {
  const browser = await launch();
  // One locale and time zone wherever the suite runs: what the page writes of times is then known.
  const context = await browser.newContext({
    viewport,
    baseURL: baseUrl,
    locale: "en-US",
    timezoneId: "UTC",
  });
  await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: baseUrl });
  await context.clock.install();
  const page = await context.newPage();
  const errors: string[] = [];
  page.on("console", (message) => {
    if (message.type() === "error") errors.push(message.text());
  });
  page.on("pageerror", (error) => errors.push(error.message));
  await page.goto("/");
  return {
    page,
    errors,
    async screenshot(name) {
      fs.mkdirSync(SCREENSHOT_DIR, { recursive: true });
      const file = path.join(SCREENSHOT_DIR, `${name}.png`);
      await page.screenshot({ path: file, fullPage: true });
      return file;
    },
    close: () => browser.close(),
  };
}

/** Registers an account through the console's form and waits for the wallets page. */
export async function registerThroughConsole(
  user: ConsoleUser,
  email: string,
  password: string,
): Promise<void> {
  const { page } = user;
  await page.getByRole("tab", { name: "Register" }).click();
  await page.getByLabel("Email").fill(email);
  await page.getByLabel("Password").fill(password);
  await page.getByRole("button", { name: "Create account" }).click();
  await page.getByRole("heading", { name: "Wallets" }).waitFor();
}
