import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { requestAsSent } from "./support/api-client.ts";
import { createTestServer, seedAccount, type TestServer } from "./support/test-server.ts";

let server: TestServer;
beforeAll(async () => {
  server = await createTestServer();
});
afterAll(() => server.close());

describe("operability", () => {
  it("GET /healthz answers 200 without a credential while the store answers", async () => {
    const response = await server.api.get("/healthz");
    expect(response.status).toBe(200);
    expect(response.body).toEqual({ status: "ok", store: server.service.store.kind });
  });

  it("serves an OpenAPI 3 document generated from the route schemas", async () => {
    const response = await server.api.get("/v1/openapi.json");
    expect(response.status).toBe(200);
    const doc = response.body;
    expect(doc.openapi).toMatch(/^3\./);
    const operations = Object.entries(doc.paths as Record<string, Record<string, unknown>>).flatMap(
      ([path, ops]) => Object.keys(ops).map((method) => `${method.toUpperCase()} ${path}`),
    );
    for (const expected of [
      "POST /v1/auth/register",
      "POST /v1/auth/login",
      "GET /v1/api-keys",
      "POST /v1/api-keys",
      "DELETE /v1/api-keys/{id}",
      "GET /v1/wallets",
      "POST /v1/wallets",
      "GET /v1/wallets/{id}",
      "DELETE /v1/wallets/{id}",
      "GET /v1/wallets/{id}/transactions",
      "GET /healthz",
    ]) {
      expect(operations).toContain(expected);
    }
    const register = doc.paths["/v1/auth/register"].post;
    expect(register.security).toEqual([]);
    expect(register.requestBody.content["application/json"].schema.properties.password.minLength).toBe(12);
    const list = doc.paths["/v1/wallets/{id}/transactions"].get;
    expect(list.parameters.map((p: { name: string }) => p.name)).toEqual(
      expect.arrayContaining(["id", "limit", "offset", "chain", "type"]),
    );
  });

  it("gives every operation a unique operationId, every response a description and every body an example", async () => {
    const doc = (await server.api.get("/v1/openapi.json")).body as OpenApiDocument;
    const operationIds: string[] = [];
    for (const { name, operation } of operationsOf(doc)) {
      expect(operation.operationId, name).toMatch(/^[a-z][A-Za-z]+$/);
      operationIds.push(operation.operationId as string);
      expect(Object.keys(operation.responses).length, name).toBeGreaterThan(1);
      for (const [status, response] of Object.entries(operation.responses)) {
        expect(response.description, `${name} ${status}`).toBeTruthy();
        expect(response.description, `${name} ${status}`).not.toBe("Default Response");
        const schema = response.content?.["application/json"]?.schema;
        if (status === "204") expect(response.content, `${name} 204 has no body`).toBeUndefined();
        else expect(schema, `${name} ${status}`).toBeDefined();
        if (status.startsWith("2") && schema)
          expect(exampleOf(doc, schema), `${name} ${status}`).toBeDefined();
        if (/^[45]/.test(status))
          expect(schema, `${name} ${status}`).toEqual({ $ref: "#/components/schemas/Error" });
      }
      const body = operation.requestBody?.content?.["application/json"]?.schema;
      if (body) expect(exampleOf(doc, body), `${name} request body`).toBeDefined();
    }
    expect(new Set(operationIds).size).toBe(operationIds.length);
    expect(operationIds).toEqual(
      expect.arrayContaining(["createWallet", "send", "updatePolicy", "revokeApiKey"]),
    );
  });

  it("declares each shared shape once, as a component that every use references", async () => {
    const doc = (await server.api.get("/v1/openapi.json")).body as OpenApiDocument;
    const components = doc.components.schemas;
    const names = Object.keys(components);
    expect(names).toEqual(
      expect.arrayContaining(["Wallet", "Transaction", "Error", "ApiKey", "Policy", "PolicyChange", "Chain"]),
    );
    // No second copy of a shape (the `…Input` twin the generator makes for every registered schema).
    expect(names.filter((name) => name.endsWith("Input"))).toEqual([]);
    const referenced = new Set(
      [...JSON.stringify(doc).matchAll(/"#\/components\/schemas\/([A-Za-z]+)"/g)].map((match) => match[1]),
    );
    expect(names.filter((name) => !referenced.has(name))).toEqual([]);
    // No shape of a component is written out again inline, in an operation or in another component.
    const shapes = new Map(Object.entries(components).map(([name, schema]) => [canonical(schema), name]));
    expect(shapes.size).toBe(names.length);
    const inline: string[] = [];
    const walk = (value: unknown, where: string, top: boolean) => {
      if (value === null || typeof value !== "object") return;
      const copy = top ? undefined : shapes.get(canonical(value));
      if (copy) inline.push(`${copy} at ${where}`);
      for (const [key, child] of Object.entries(value)) walk(child, `${where}.${key}`, false);
    };
    walk(doc.paths, "paths", false);
    for (const [name, schema] of Object.entries(components)) walk(schema, name, true);
    expect(inline).toEqual([]);
  });

  it("serves the docs UI and every asset it loads from the service itself, with nothing from elsewhere", async () => {
    const page = await fetch(`${server.url}/docs`);
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toContain("text/html");
    const html = await page.text();
    const assets = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((match) => match[1] as string);
    expect(assets.length).toBeGreaterThan(3);
    const served = new URL(server.url);
    const bodies: string[] = [html];
    for (const asset of assets) {
      const url = new URL(asset, `${server.url}/docs`);
      expect(url.origin, asset).toBe(served.origin);
      const response = await fetch(url);
      expect(response.status, asset).toBe(200);
      expectOnlySelf(response.headers.get("content-security-policy"), asset);
      const text = await response.text();
      if (/\.(css|js|html)$/.test(url.pathname)) bodies.push(text);
      if (url.pathname.endsWith(".css")) {
        // A stylesheet loads nothing: no @import, no url() but inline data.
        expect(text, asset).not.toMatch(/@import/);
        for (const [, target] of text.matchAll(/url\(\s*["']?([^"')]+)/g))
          expect(target, asset).toMatch(/^data:/);
      }
    }
    expectOnlySelf(page.headers.get("content-security-policy"), "/docs");
    // The page and the initializer name no other host; the bundles hold no font, CDN or analytics host.
    for (const text of bodies.slice(0, 1).concat(bodies.filter((b) => b.includes("SwaggerUIBundle(")))) {
      const code = text.replace(/^\s*\/\/.*$/gm, ""); // a comment loads nothing
      expect(code.match(/https?:\/\/[^\s"'`)]+/g) ?? []).toEqual([]);
    }
    for (const text of bodies) {
      expect(text).not.toMatch(
        /fonts\.googleapis|fonts\.gstatic|unpkg\.com|jsdelivr|cdnjs|googletagmanager|google-analytics|segment\.(io|com)|sentry\.io|scarf\.sh/,
      );
    }
    // The initializer renders the service's own document, and turns off the external validator badge.
    const initializer = bodies.find((b) => b.includes("SwaggerUIBundle("));
    expect(initializer).toContain("validatorUrl: null");
    expect(initializer).toContain("resolveUrl('./json')");
    const shown = await (await fetch(`${server.url}/docs/json`)).json();
    expect(shown).toEqual((await server.api.get("/v1/openapi.json")).body);
  });

  it("has no cache keep an answer, one with a secret shown once above all, nor a browser read one as another type", async () => {
    const account = await seedAccount(server.api);
    const token = account.accessToken;
    const endpoint = await server.api.post(
      "/v1/webhook-endpoints",
      { url: "http://127.0.0.1:9/hook" },
      token,
    );
    const answers = {
      "login (access token)": await server.api.post("/v1/auth/login", {
        email: account.email,
        password: account.password,
      }),
      "new API key": await server.api.post("/v1/api-keys", { name: "kept?", role: "read" }, token),
      "new webhook endpoint (secret)": endpoint,
      "new webhook secret": await server.api.post(
        `/v1/webhook-endpoints/${endpoint.body.id}/rotate-secret`,
        undefined,
        token,
      ),
      "wallet list": await server.api.get("/v1/wallets", token),
      "refusal without a credential": await server.api.get("/v1/wallets"),
      "unknown route": await server.api.get("/v1/nope"),
    };
    for (const [what, answer] of Object.entries(answers)) {
      expect(answer.status, what).toBeLessThan(500);
      expect(answer.headers.get("cache-control"), what).toBe("no-store");
      expect(answer.headers.get("x-content-type-options"), what).toBe("nosniff");
    }
    expect(answers["new webhook secret"].body.secret).toMatch(/^whsec_/);
  });

  it("sends /docs/static/index.html, with a query or without, and the docs page with a query, to the docs page (they redirected to themselves for good, or loaded the page as the document)", async () => {
    for (const path of [
      "/docs/static/index.html",
      "/docs/static/index.html?url=/v1/openapi.json",
      "/docs/?url=https://elsewhere.example/spec.json",
      "/docs?a=1",
    ]) {
      const response = await fetch(`${server.url}${path}`, { redirect: "manual" });
      expect(response.status, path).toBe(302);
      expect(response.headers.get("location"), path).toBe("/docs/");
    }
    const followed = await fetch(`${server.url}/docs/static/index.html?a=1`);
    expect(followed.status).toBe(200);
    expect(await followed.text()).toContain("swagger-initializer.js");
  });

  it("answers a path out of the docs' files, sent as it is, the API's 404, and logs no error (it was a 500, logged as an error)", async () => {
    // A browser or fetch would resolve `..` and `.` before sending: a plain HTTP request sends them.
    for (const path of [
      "/docs/static/../../package.json",
      "/docs/static/%2e%2e/%2e%2e/%2e%2e/package.json",
      "/docs/static//etc/passwd",
      "/docs/static/./index.css",
    ]) {
      const response = await requestAsSent(server.url, { path });
      expect(response.status, path).toBe(404);
      expect(JSON.parse(response.text).error, path).toMatchObject({
        code: "NotFound",
        reason: "route_not_found",
      });
      const logged = server.logs.lines
        .map((line) => JSON.parse(line) as { level: number; requestId?: string })
        .filter((line) => line.requestId === response.headers["x-request-id"] && line.level >= 50);
      expect(logged, path).toEqual([]);
    }
  });

  it("logs JSON lines with the request id and never a password, API key or token", async () => {
    const account = await seedAccount(server.api);
    const wallet = await server.api.post("/v1/wallets", { name: "logged", chains: ["base"] }, account.apiKey);
    await server.api.post("/v1/auth/login", { email: account.email, password: "wrong-password-123" });
    const lines = server.logs.lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    const forWallet = lines.filter((l) => l.requestId === wallet.headers.get("x-request-id"));
    expect(forWallet.length).toBeGreaterThan(0);
    const text = server.logs.text();
    for (const secret of [account.password, account.apiKey, account.accessToken, "wrong-password-123"]) {
      expect(text.includes(secret)).toBe(false);
    }
  });
});

interface OpenApiOperation {
  operationId?: string;
  requestBody?: { content?: Record<string, { schema?: unknown }> };
  responses: Record<string, { description?: string; content?: Record<string, { schema?: unknown }> }>;
}
interface OpenApiDocument {
  paths: Record<string, Record<string, OpenApiOperation>>;
  components: { schemas: Record<string, Record<string, unknown>> };
}

function operationsOf(doc: OpenApiDocument) {
  return Object.entries(doc.paths).flatMap(([path, operations]) =>
    Object.entries(operations).map(([method, operation]) => ({
      name: `${method.toUpperCase()} ${path}`,
      operation,
    })),
  );
}

/** The example a renderer shows for a schema: its own, its referenced component's, or its items'. */
function exampleOf(doc: OpenApiDocument, schema: unknown): unknown {
  const node = schema as { example?: unknown; $ref?: string; allOf?: unknown[]; items?: unknown };
  if (node.example !== undefined) return node.example;
  if (node.$ref) return exampleOf(doc, doc.components.schemas[node.$ref.split("/").pop() as string]);
  if (node.allOf?.length === 1) return exampleOf(doc, node.allOf[0]);
  if (node.items) return exampleOf(doc, node.items);
  return undefined;
}

/** JSON with sorted keys, to compare shapes. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, inner: unknown) =>
    inner && typeof inner === "object" && !Array.isArray(inner)
      ? Object.fromEntries(Object.entries(inner).sort(([a], [b]) => a.localeCompare(b)))
      : inner,
  );
}

/** A Content-Security-Policy that lets the page load from the service only (and inline data images). */
function expectOnlySelf(header: string | null, where: string): void {
  expect(header, where).toBeTruthy();
  const directives = Object.fromEntries(
    (header ?? "")
      .split(";")
      .map((part) => part.trim().split(/\s+/))
      .filter((words) => words[0])
      .map(([name, ...sources]) => [name, sources]),
  );
  expect(directives["default-src"], where).toEqual(["'none'"]);
  for (const [name, sources] of Object.entries(directives)) {
    for (const source of sources as string[]) {
      expect(["'self'", "'none'", ...(name === "img-src" ? ["data:"] : [])], `${where} ${name}`).toContain(
        source,
      );
    }
  }
}

describe("a request that never finishes", () => {
  it("is cut after SVC_REQUEST_TIMEOUT_MS (408, its connection closed), and the service goes on answering", async () => {
    const strict = await createTestServer({ env: { SVC_REQUEST_TIMEOUT_MS: "400" } });
    try {
      const { hostname, port } = new URL(strict.url);
      // The headers and one byte of a 100-byte body, then nothing more.
      const socket = connect(Number(port), hostname);
      // Without the service's limit nothing would ever close it: the test gives up after 15 s instead.
      socket.setTimeout(15_000, () => socket.destroy());
      socket.write(
        "POST /v1/auth/login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{",
      );
      const answered = await new Promise<string>((resolve) => {
        let received = "";
        socket.on("data", (chunk) => (received += chunk));
        socket.on("close", () => resolve(received));
      });
      expect(answered).toMatch(/^HTTP\/1\.1 408 /);
      expect(errorOfRawAnswer(answered)).toMatchObject({
        code: "ValidationError",
        reason: "request_timeout",
      });
      expect((await strict.api.get("/healthz")).status).toBe(200);
    } finally {
      await strict.close();
    }
  });
});

describe("stopping while a client does not read its answer", () => {
  it("cuts the answer after a short drain, so the service stops: the client cannot hold its stop (it waited for as long as the client kept its socket)", async () => {
    const stopping = await createTestServer();
    const { hostname, port } = new URL(stopping.url);
    // Asks for the docs' bundle (over a megabyte, more than the sockets' buffers hold), reads the first
    // chunk of the answer, then reads nothing more and never closes.
    const socket = connect(Number(port), hostname);
    onTestFinished(() => {
      socket.destroy();
    });
    socket.write(`GET /docs/static/swagger-ui-bundle.js HTTP/1.1\r\nHost: ${hostname}:${port}\r\n\r\n`);
    const head = await new Promise<string>((resolve) =>
      socket.once("data", (chunk) => resolve(String(chunk))),
    );
    socket.pause();
    expect(head).toMatch(/^HTTP\/1\.1 200 /);
    const cut = new Promise<void>((resolve) => socket.once("close", () => resolve()));
    // Far above the drain, where nothing but the client would have ended the wait.
    const gaveUp = new Promise<"still stopping">((resolve) =>
      setTimeout(() => resolve("still stopping"), 60_000).unref(),
    );
    expect(await Promise.race([stopping.close().then(() => "stopped" as const), gaveUp])).toBe("stopped");
    // The service ended the connection: read on, the client comes to its end.
    socket.resume();
    await cut;
  });
});

describe("a request the HTTP parser refuses", () => {
  it.each([
    ["a malformed request line", "GARBAGE\r\n\r\n", 400, "malformed_request"],
    [
      "a header with no colon",
      "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nno-colon-here\r\n\r\n",
      400,
      "malformed_request",
    ],
    [
      "20 kB of headers",
      `GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ${"a".repeat(20_000)}\r\n\r\n`,
      431,
      "headers_too_large",
    ],
  ])(
    "answers %s in the API's error shape, with a request id, and closes the connection",
    async (_what, request, status, reason) => {
      const { hostname, port } = new URL(server.url);
      const socket = connect(Number(port), hostname);
      socket.setTimeout(15_000, () => socket.destroy());
      socket.write(request);
      const answered = await new Promise<string>((resolve) => {
        let received = "";
        socket.on("data", (chunk) => (received += chunk));
        socket.on("close", () => resolve(received));
      });
      expect(answered.split("\r\n")[0]).toMatch(new RegExp(`^HTTP/1\\.1 ${status} `));
      const error = errorOfRawAnswer(answered);
      expect(error).toMatchObject({ code: "ValidationError", reason });
      expect(answered).toMatch(new RegExp(`\r\nx-request-id: ${error.requestId}\r\n`, "i"));
      expect((await server.api.get("/healthz")).status).toBe(200);
    },
  );
});

/** The error object of a raw HTTP/1.1 answer's JSON body (whose Content-Length must be right). */
function errorOfRawAnswer(answer: string): {
  code: string;
  message: string;
  requestId: string;
  reason?: string;
} {
  const [head = "", body = ""] = answer.split("\r\n\r\n");
  expect(head).toMatch(/\r\ncontent-type: application\/json/i);
  expect(head).toContain(`\r\nContent-Length: ${Buffer.byteLength(body)}`);
  const { error } = JSON.parse(body);
  expect(error.requestId).toMatch(/^req_/);
  expect(typeof error.message).toBe("string");
  return error;
}
