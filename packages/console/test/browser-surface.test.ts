/**
 * The browser side as someone hostile meets it, in a real browser: the API's documentation page at /docs
 * renders under its Content-Security-Policy without a violation.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestServer, type TestServer } from "../../server/test/support/test-server.ts";
import { type ConsoleUser, openUser } from "./support/browser.ts";

let server: TestServer;
let owner: ConsoleUser;

beforeAll(async () => {
  server = await createTestServer();
  owner = await openUser(server.url);
});
afterAll(async () => {
  await owner?.close();
  await server?.close();
});

describe("the browser side", () => {
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
});
