/**
 * The console's files as the service serves them at `/`: the page and its assets without a credential, each
 * under a Content-Security-Policy that allows this origin only, nothing outside the build, and a plain
 * answer when the console has not been built.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import Fastify from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CONSOLE_CSP, consoleBuildDir, registerConsole } from "../src/http/console.ts";
import type { App } from "../src/http/types.ts";
import { createTestServer, type TestServer } from "./support/test-server.ts";

let server: TestServer;
beforeAll(async () => {
  server = await createTestServer();
});
afterAll(() => server.close());

describe("the console at /", () => {
  it("serves the page and every asset it names, public, under a same-origin-only CSP", async () => {
    const page = await fetch(`${server.url}/`);
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toMatch(/^text\/html/);
    expect(page.headers.get("content-security-policy")).toBe(CONSOLE_CSP);
    expect(page.headers.get("cache-control")).toBe("no-cache");
    const html = await page.text();
    const assets = [...html.matchAll(/(?:src|href)="(\/[^"]+)"/g)].map((m) => m[1] as string);
    expect(assets.some((a) => a.startsWith("/assets/") && a.endsWith(".js"))).toBe(true);
    for (const asset of assets) {
      const response = await fetch(`${server.url}${asset}`);
      expect(response.status, asset).toBe(200);
      expect(response.headers.get("content-security-policy"), asset).toBe(CONSOLE_CSP);
      // Read to the end, as a browser does: an answer left unread holds its connection.
      await response.arrayBuffer();
    }
    // Nothing in the page reaches another origin.
    expect(html).not.toMatch(/(?:src|href)="(?:https?:)?\/\//);
    for (const directive of [
      "default-src 'none'",
      "script-src 'self'",
      "connect-src 'self'",
      "style-src 'self'",
    ]) {
      expect(CONSOLE_CSP).toContain(directive);
    }
  });

  it("answers a Range or precondition it cannot meet 416 or 412 in the API's error shape (it was a 500, logged as an error)", async () => {
    const html = await (await fetch(`${server.url}/`)).text();
    const style = html.match(/href="(\/assets\/[^"]+\.css)"/)?.[1] as string;
    for (const [path, headers, status] of [
      [style, { range: "bytes=99999999-" }, 416],
      [style, { range: "bytes=5-1" }, 416],
      ["/", { "if-match": '"nope"' }, 412],
      ["/favicon.svg", { "if-unmodified-since": "Mon, 01 Jan 1990 00:00:00 GMT" }, 412],
    ] as const) {
      const response = await fetch(`${server.url}${path}`, { headers });
      expect(response.status, `${path} ${JSON.stringify(headers)}`).toBe(status);
      const body = (await response.json()) as { error: { code: string; reason: string } };
      expect(body.error).toMatchObject({
        code: "ValidationError",
        reason: status === 416 ? "range_not_satisfiable" : "precondition_failed",
      });
    }
  });

  it("caches hashed assets for good; an unknown asset or a path out of the build is the API's 404", async () => {
    const html = await (await fetch(`${server.url}/`)).text();
    const script = html.match(/src="(\/assets\/[^"]+\.js)"/)?.[1] as string;
    const asset = await fetch(`${server.url}${script}`);
    expect(asset.headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
    expect(asset.headers.get("content-type")).toMatch(/javascript/);
    await asset.arrayBuffer();
    for (const missing of [
      "/assets/nope.js",
      "/assets/%2e%2e/index.html",
      "/assets/..%2f..%2fpackage.json",
    ]) {
      const response = await fetch(`${server.url}${missing}`);
      expect(response.status, missing).toBe(404);
      expect(await response.text(), missing).not.toMatch(/"name":\s*"@svc\/console"/);
    }
  });

  it("answers 503 with how to build it when the console is not built", async () => {
    const empty = fs.mkdtempSync(path.join(os.tmpdir(), "svc-console-"));
    const app = Fastify() as unknown as App;
    try {
      await registerConsole(app, empty);
      const response = await app.inject({ method: "GET", url: "/" });
      expect(response.statusCode).toBe(503);
      expect(response.body).toContain("npm run build -w @svc/console");
      expect(response.headers["content-security-policy"]).toBe(CONSOLE_CSP);
    } finally {
      await app.close();
      fs.rmSync(empty, { recursive: true, force: true });
    }
  });

  it("finds the build of the installed @svc/console package", () => {
    expect(consoleBuildDir()).toBe(path.resolve(import.meta.dirname, "../../console/dist"));
  });
});
