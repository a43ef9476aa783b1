/**
 * The outbound guard over real sockets: HTTP servers on loopback addresses stand for the targets a caller
 * must not reach (loopback services, the private network, the metadata endpoint); names resolve through an
 * injected resolver, the one boundary a test must control (no public DNS name resolves to loopback offline).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { type AddressInfo, isIP } from "node:net";
import { networkInterfaces } from "node:os";
import { gzipSync } from "node:zlib";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { AppError } from "../src/internal/errors.ts";
import { headersForOrigin, OutboundFetcher, type Resolver } from "../src/x402/outbound-fetch.ts";

interface TestServer {
  url: string;
  port: number;
  /** Requests received, in order. */
  requests: { method: string; url: string; headers: IncomingMessage["headers"]; body: string }[];
  close(): Promise<void>;
}

async function startServer(
  host: string,
  handler: (req: IncomingMessage, res: ServerResponse, body: string) => void,
  port = 0,
): Promise<TestServer> {
  const requests: TestServer["requests"] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      requests.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers, body });
      handler(req, res, body);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, resolve);
  });
  const actualPort = (server.address() as AddressInfo).port;
  return {
    url: `http://${host.includes(":") ? `[${host}]` : host}:${actualPort}`,
    port: actualPort,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** A resolver over a fixed table, counting its calls; names not in it do not exist. */
function tableResolver(table: Record<string, string[]>): Resolver & { calls: string[] } {
  const calls: string[] = [];
  const resolve = async (hostname: string) => {
    calls.push(hostname);
    const addresses = table[hostname];
    if (!addresses)
      throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" });
    return addresses.map((address) => ({
      address,
      family: address.includes(":") ? (6 as const) : (4 as const),
    }));
  };
  return Object.assign(resolve, { calls });
}

async function refusal(promise: Promise<unknown>): Promise<AppError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(AppError);
  return error as AppError;
}

const json = (res: ServerResponse, status: number, body: unknown) => {
  res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
};

describe("outbound requests refused by the guard", () => {
  let secret: TestServer;
  let fetcher: OutboundFetcher;

  beforeAll(async () => {
    // A loopback service that must never be reached: every test below asserts it saw nothing.
    secret = await startServer("127.0.0.1", (_req, res) =>
      json(res, 200, { secret: "instance credentials" }),
    );
  });
  afterEach(async () => {
    expect(secret.requests).toEqual([]);
    await fetcher?.close();
  });
  afterAll(async () => {
    await secret.close();
  });

  it.each([
    ["loopback", () => secret.url, "loopback"],
    ["the whole 127/8", () => `http://127.1.2.3:${secret.port}/`, "loopback"],
    ["10/8", () => "http://10.0.0.1/", "private"],
    ["192.168/16", () => "http://192.168.0.1/", "private"],
    ["the metadata endpoint", () => "http://169.254.169.254/latest/meta-data/", "link-local"],
    ["IPv6 loopback", () => `http://[::1]:${secret.port}/`, "loopback"],
    ["IPv4-mapped loopback", () => `http://[::ffff:127.0.0.1]:${secret.port}/`, "loopback"],
    ["IPv4-mapped metadata", () => "http://[::ffff:169.254.169.254]/", "link-local"],
    ["NAT64 metadata", () => "http://[64:ff9b::a9fe:a9fe]/", "link-local"],
    ["IPv6 link-local", () => "http://[fe80::1]/", "link-local"],
    ["a decimal IPv4 host", () => `http://2130706433:${secret.port}/`, "loopback"],
    ["a hexadecimal IPv4 host", () => `http://0x7f.1:${secret.port}/`, "loopback"],
    ["an octal IPv4 host", () => `http://0177.0.0.1:${secret.port}/`, "loopback"],
    // 0.0.0.0 reaches the local host on Linux.
    ["0.0.0.0 written as 0", () => `http://0:${secret.port}/`, "reserved"],
    ["an SIIT-translated IPv6 loopback", () => `http://[::ffff:0:7f00:1]:${secret.port}/`, "reserved"],
    ["local-use NAT64", () => "http://[64:ff9b:1::a00:1]/", "private"],
  ])("refuses %s with 400 destination_not_allowed", async (_name, url, kind) => {
    fetcher = new OutboundFetcher();
    const error = await refusal(fetcher.fetch({ url: url() }));
    expect(error).toMatchObject({ status: 400, code: "ValidationError", reason: "destination_not_allowed" });
    expect(error.details).toMatchObject({ kind });
  });

  it("refuses a hostname resolving to loopback, and does not say the address", async () => {
    const resolve = tableResolver({ "evil.example": ["127.0.0.1"] });
    fetcher = new OutboundFetcher({ resolve });
    const error = await refusal(fetcher.fetch({ url: `http://evil.example:${secret.port}/` }));
    expect(error).toMatchObject({ status: 400, reason: "destination_not_allowed" });
    expect(error.message).toBe(
      "Refusing to connect to evil.example: it resolves to a loopback address; outbound requests reach public addresses only unless SVC_OUTBOUND_ALLOW exempts them",
    );
    expect(error.message).not.toContain("127.0.0.1");
  });

  it.each([
    ["10/8", ["10.1.2.3"], "private"],
    ["the metadata endpoint", ["169.254.169.254"], "link-local"],
    ["IPv6 loopback", ["::1"], "loopback"],
    ["an SIIT-translated IPv6 loopback", ["::ffff:0:7f00:1"], "reserved"],
    ["one private address among public ones", ["93.184.216.34", "10.0.0.7"], "private"],
  ])("refuses a hostname resolving to %s", async (_name, addresses, kind) => {
    fetcher = new OutboundFetcher({ resolve: tableResolver({ "internal.example": addresses }) });
    const error = await refusal(fetcher.fetch({ url: "http://internal.example/" }));
    expect(error).toMatchObject({ reason: "destination_not_allowed", details: { kind } });
  });

  it("refuses localhost through the system resolver", async () => {
    fetcher = new OutboundFetcher();
    const error = await refusal(fetcher.fetch({ url: `http://localhost:${secret.port}/` }));
    expect(error).toMatchObject({ reason: "destination_not_allowed", details: { kind: "loopback" } });
  });

  it("refuses other schemes and URLs with credentials", async () => {
    fetcher = new OutboundFetcher();
    for (const url of ["file:///etc/passwd", "ftp://example.com/", "gopher://127.0.0.1:70/"]) {
      expect(await refusal(fetcher.fetch({ url }))).toMatchObject({ reason: "destination_not_allowed" });
    }
    expect(await refusal(fetcher.fetch({ url: "http://user:pw@example.com/" }))).toMatchObject({
      reason: "destination_not_allowed",
    });
  });
});

describe("redirects to refused destinations", () => {
  let secret: TestServer;
  let redirector: TestServer;
  let fetcher: OutboundFetcher;
  let target = "";

  beforeAll(async () => {
    secret = await startServer("127.0.0.1", (_req, res) =>
      json(res, 200, { secret: "instance credentials" }),
    );
    redirector = await startServer("127.0.0.1", (_req, res) => {
      res.writeHead(302, { location: target }).end();
    });
  });
  afterEach(async () => {
    expect(secret.requests).toEqual([]);
    await fetcher?.close();
  });
  afterAll(async () => {
    await secret.close();
    await redirector.close();
  });

  /** The redirector is reachable as `public.example`, exempt by name: only what it redirects to is at stake. */
  function fetcherThroughRedirector(): OutboundFetcher {
    return new OutboundFetcher({
      allow: ["public.example"],
      resolve: tableResolver({ "public.example": ["127.0.0.1"], "internal.example": ["127.0.0.1"] }),
    });
  }

  it.each([
    ["loopback", () => `${secret.url}/`, "loopback"],
    ["10/8", () => "http://10.0.0.1/", "private"],
    ["the metadata endpoint", () => "http://169.254.169.254/latest/meta-data/", "link-local"],
    ["a hostname resolving to loopback", () => `http://internal.example:${secret.port}/`, "loopback"],
    ["IPv4-mapped loopback", () => `http://[::ffff:7f00:1]:${secret.port}/`, "loopback"],
  ])("refuses a redirect to %s", async (_name, location, kind) => {
    target = location();
    fetcher = fetcherThroughRedirector();
    const error = await refusal(fetcher.fetch({ url: `http://public.example:${redirector.port}/start` }));
    expect(error).toMatchObject({ status: 400, reason: "destination_not_allowed", details: { kind } });
    expect(redirector.requests.at(-1)?.url).toBe("/start");
  });

  it("refuses a redirect to another scheme", async () => {
    target = "file:///etc/passwd";
    fetcher = fetcherThroughRedirector();
    const error = await refusal(fetcher.fetch({ url: `http://public.example:${redirector.port}/` }));
    expect(error).toMatchObject({ reason: "destination_not_allowed" });
  });
});

describe("DNS rebinding", () => {
  it("connects to the address it checked, never to one a second answer gives", async () => {
    // Only 127.0.0.1 is exempt. The name first resolves there, then to 127.0.0.2, where a service listens.
    const hidden = await startServer("127.0.0.2", (_req, res) => json(res, 200, { secret: true }));
    let calls = 0;
    const resolve: Resolver = async () => [{ address: ++calls === 1 ? "127.0.0.1" : "127.0.0.2", family: 4 }];
    const fetcher = new OutboundFetcher({ allow: ["127.0.0.1/32"], resolve });
    try {
      // Nothing listens on 127.0.0.1 at that port: the connection that was checked is refused by the OS.
      const error = await refusal(fetcher.fetch({ url: `http://rebind.example:${hidden.port}/` }));
      expect(error).toMatchObject({
        status: 502,
        reason: "resource_unreachable",
        details: { code: "ECONNREFUSED" },
      });
      expect(hidden.requests).toEqual([]);
      expect(calls).toBe(1);
    } finally {
      await fetcher.close();
      await hidden.close();
    }
  });
});

describe("exempt destinations", () => {
  let service: TestServer;
  let fetcher: OutboundFetcher;

  beforeAll(async () => {
    service = await startServer("127.0.0.1", (req, res, body) => {
      if (req.url === "/hop") res.writeHead(307, { location: "/data" }).end();
      else json(res, 200, { path: req.url, method: req.method, body });
    });
  });
  afterEach(async () => {
    await fetcher?.close();
  });
  afterAll(async () => {
    await service.close();
  });

  it("reaches loopback when SVC_OUTBOUND_ALLOW lists its range", async () => {
    fetcher = new OutboundFetcher({ allow: ["127.0.0.0/8", "::1/128"] });
    const response = await fetcher.fetch({ url: `${service.url}/data` });
    expect(response.status).toBe(200);
    expect(JSON.parse(response.body.toString())).toMatchObject({ path: "/data" });
  });

  it("reaches a hostname listed by name, whatever it resolves to", async () => {
    fetcher = new OutboundFetcher({ allow: ["localhost"] });
    const response = await fetcher.fetch({ url: `http://localhost:${service.port}/data` });
    expect(response.status).toBe(200);
  });

  it("follows a redirect within the exempt range and keeps the method and body of a 307", async () => {
    fetcher = new OutboundFetcher({ allow: ["127.0.0.0/8"] });
    const response = await fetcher.fetch({ url: `${service.url}/hop`, method: "POST", body: "hello" });
    expect(response.status).toBe(200);
    expect(response.redirects).toEqual([`${service.url}/data`]);
    expect(JSON.parse(response.body.toString())).toEqual({ path: "/data", method: "POST", body: "hello" });
  });

  it("refuses a redirect out of the exempt range", async () => {
    const outside = await startServer("127.0.0.3", (_req, res) => json(res, 200, {}));
    const bouncer = await startServer("127.0.0.1", (_req, res) => {
      res.writeHead(302, { location: `${outside.url}/` }).end();
    });
    fetcher = new OutboundFetcher({ allow: ["127.0.0.1/32"] });
    try {
      const error = await refusal(fetcher.fetch({ url: bouncer.url }));
      expect(error).toMatchObject({ reason: "destination_not_allowed", details: { kind: "loopback" } });
      expect(outside.requests).toEqual([]);
    } finally {
      await outside.close();
      await bouncer.close();
    }
  });
});

describe("redirect handling", () => {
  let chain: TestServer;
  let other: TestServer;
  let fetcher: OutboundFetcher;

  beforeAll(async () => {
    // /n/<k> redirects to /n/<k-1> until /n/0, which answers.
    chain = await startServer("127.0.0.1", (req, res) => {
      const match = /^\/n\/(\d+)$/.exec(req.url ?? "");
      const left = Number(match?.[1] ?? 0);
      if (req.url === "/see-other") res.writeHead(303, { location: "/n/0" }).end();
      else if (req.url === "/elsewhere") res.writeHead(302, { location: `${other.url}/landing` }).end();
      else if (req.url === "/same-origin") res.writeHead(302, { location: "/n/0" }).end();
      else if (left > 0) res.writeHead(302, { location: `/n/${left - 1}` }).end();
      else json(res, 200, { method: req.method, headers: req.headers });
    });
    other = await startServer("127.0.0.2", (req, res) => json(res, 200, { headers: req.headers }));
    fetcher = new OutboundFetcher({ allow: ["127.0.0.0/8"] });
  });
  afterAll(async () => {
    await fetcher.close();
    await chain.close();
    await other.close();
  });

  it("follows five redirects", async () => {
    const response = await fetcher.fetch({ url: `${chain.url}/n/5` });
    expect(response.status).toBe(200);
    expect(response.redirects).toHaveLength(5);
  });

  it("gives up at the sixth with 502 too_many_redirects", async () => {
    const before = chain.requests.length;
    const error = await refusal(fetcher.fetch({ url: `${chain.url}/n/6` }));
    expect(error).toMatchObject({ status: 502, reason: "too_many_redirects" });
    expect(chain.requests.length - before).toBe(6);
  });

  it("turns a POST into a GET without body on 303", async () => {
    const response = await fetcher.fetch({
      url: `${chain.url}/see-other`,
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    const answer = JSON.parse(response.body.toString());
    expect(answer.method).toBe("GET");
    expect(answer.headers["content-type"]).toBeUndefined();
  });

  it("does not carry a payment or credentials to another origin, but keeps them on the same origin", async () => {
    const headers = {
      "payment-signature": "signed",
      "x-payment": "signed",
      authorization: "Bearer t",
      "x-other": "kept",
    };
    const away = JSON.parse(
      (await fetcher.fetch({ url: `${chain.url}/elsewhere`, headers })).body.toString(),
    );
    expect(away.headers["payment-signature"]).toBeUndefined();
    expect(away.headers["x-payment"]).toBeUndefined();
    expect(away.headers.authorization).toBeUndefined();
    expect(away.headers["x-other"]).toBe("kept");
    const home = JSON.parse(
      (await fetcher.fetch({ url: `${chain.url}/same-origin`, headers })).body.toString(),
    );
    expect(home.headers["payment-signature"]).toBe("signed");
  });

  it("does not forward Host or hop-by-hop headers from the caller", async () => {
    const response = await fetcher.fetch({
      url: `${chain.url}/n/0`,
      headers: { host: "metadata.google.internal", connection: "close, x-drop", "x-keep": "1" },
    });
    const answer = JSON.parse(response.body.toString());
    expect(answer.headers.host).toBe(new URL(chain.url).host);
    expect(answer.headers["x-keep"]).toBe("1");
  });
});

describe("time and size bounds", () => {
  let server: TestServer;
  let fetcher: OutboundFetcher;
  const big = "x".repeat(4096);

  beforeAll(async () => {
    server = await startServer("127.0.0.1", (req, res) => {
      if (req.url === "/silent") return; // never answers
      if (req.url === "/trickle") {
        // Slowloris: answers at once, then a byte now and then, never ending.
        res.writeHead(200, { "content-type": "text/plain" });
        const drip = setInterval(() => res.write("x"), 20);
        res.on("close", () => clearInterval(drip));
        return;
      }
      if (req.url === "/huge-headers") {
        const headers: Record<string, string> = {};
        for (let i = 0; i < 200; i++) headers[`x-filler-${i}`] = "y".repeat(1000);
        res.writeHead(200, headers).end("ok");
        return;
      }
      if (req.url === "/declared") res.writeHead(200, { "content-length": big.length }).end(big);
      else if (req.url === "/chunked") {
        res.writeHead(200);
        res.write(big.slice(0, 1024));
        res.end(big.slice(1024));
      } else if (req.url === "/gzip-bomb") {
        res.writeHead(200, { "content-encoding": "gzip" }).end(gzipSync(Buffer.alloc(1024 * 1024)));
      } else res.writeHead(200).end("small");
    });
  });
  afterEach(async () => {
    await fetcher?.close();
  });
  afterAll(async () => {
    await server.close();
  });

  it("gives up on a resource that does not answer with 502 resource_timeout", async () => {
    fetcher = new OutboundFetcher({ allow: ["127.0.0.0/8"], timeoutMs: 300 });
    const error = await refusal(fetcher.fetch({ url: `${server.url}/silent` }));
    expect(error).toMatchObject({ status: 502, reason: "resource_timeout", details: { timeoutMs: 300 } });
  });

  it("gives up on a body that trickles without end with 502 resource_timeout", async () => {
    fetcher = new OutboundFetcher({ allow: ["127.0.0.0/8"], timeoutMs: 300 });
    const error = await refusal(fetcher.fetch({ url: `${server.url}/trickle` }));
    expect(error).toMatchObject({ status: 502, reason: "resource_timeout" });
  });

  it("refuses 200 KB of response headers with 502 resource_unreachable", async () => {
    fetcher = new OutboundFetcher({ allow: ["127.0.0.0/8"] });
    const error = await refusal(fetcher.fetch({ url: `${server.url}/huge-headers` }));
    expect(error).toMatchObject({ status: 502, reason: "resource_unreachable" });
  });

  it.each(["/declared", "/chunked", "/gzip-bomb"])(
    "refuses a body over the cap with 502 resource_too_large (%s)",
    async (path) => {
      fetcher = new OutboundFetcher({ allow: ["127.0.0.0/8"], maxResponseBytes: 2048 });
      const error = await refusal(fetcher.fetch({ url: `${server.url}${path}` }));
      expect(error).toMatchObject({ status: 502, reason: "resource_too_large", details: { maxBytes: 2048 } });
    },
  );

  it("reads a body under the cap", async () => {
    fetcher = new OutboundFetcher({ allow: ["127.0.0.0/8"], maxResponseBytes: 2048 });
    expect((await fetcher.fetch({ url: `${server.url}/small` })).body.toString()).toBe("small");
  });

  it("says a refused connection is unreachable", async () => {
    const closed = await startServer("127.0.0.1", () => undefined);
    await closed.close();
    fetcher = new OutboundFetcher({ allow: ["127.0.0.0/8"] });
    const error = await refusal(fetcher.fetch({ url: `${closed.url}/` }));
    expect(error).toMatchObject({
      status: 502,
      reason: "resource_unreachable",
      details: { code: "ECONNREFUSED" },
    });
  });
});

describe("the service's own backends (its chain RPC endpoints), loopback exempt as on the devnet", () => {
  // Stands for a local EVM node, which takes anvil_impersonateAccount from whoever reaches it.
  let node: TestServer;
  let elsewhere: TestServer;
  let redirector: TestServer;
  let fetcher: OutboundFetcher;
  let target = "";

  beforeAll(async () => {
    node = await startServer("127.0.0.1", (_req, res) =>
      json(res, 200, { jsonrpc: "2.0", id: 1, result: null }),
    );
    elsewhere = await startServer("127.0.0.1", (_req, res) => json(res, 200, { ok: true }));
    redirector = await startServer("127.0.0.1", (_req, res) => {
      res.writeHead(307, { location: target }).end();
    });
  });
  afterEach(async () => {
    expect(node.requests).toEqual([]);
    await fetcher?.close();
  });
  afterAll(async () => {
    await Promise.all([node.close(), elsewhere.close(), redirector.close()]);
  });

  const devnetFetcher = (backend: string) =>
    new OutboundFetcher({
      allow: ["127.0.0.0/8", "::1/128", "0.0.0.0/8", "localhost", "rebound.example"],
      resolve: tableResolver({ localhost: ["127.0.0.1"], "rebound.example": ["127.0.0.1"] }),
      backends: [backend],
    });

  it.each([
    ["as configured", () => `${node.url}/`],
    ["as another loopback address", () => `http://127.0.0.2:${node.port}/`],
    ["as a short IPv4 form", () => `http://127.1:${node.port}/`],
    ["as an IPv4-mapped IPv6 address", () => `http://[::ffff:127.0.0.1]:${node.port}/`],
    ["as the unspecified address", () => `http://0.0.0.0:${node.port}/`],
    ["by a name exempt by name", () => `http://localhost:${node.port}/`],
    ["by a name that resolves to it", () => `http://rebound.example:${node.port}/`],
  ])("refuses the node's endpoint named %s", async (_name, url) => {
    fetcher = devnetFetcher(node.url);
    const error = await refusal(
      fetcher.fetch({
        url: url(),
        method: "POST",
        body: '{"jsonrpc":"2.0","id":1,"method":"anvil_impersonateAccount","params":[]}',
      }),
    );
    expect(error).toMatchObject({
      status: 400,
      reason: "destination_not_allowed",
      details: { kind: "backend" },
    });
  });

  it("refuses a backend configured by name, reached by address", async () => {
    fetcher = devnetFetcher(`http://localhost:${node.port}`);
    const error = await refusal(fetcher.fetch({ url: `${node.url}/` }));
    expect(error).toMatchObject({ reason: "destination_not_allowed", details: { kind: "backend" } });
  });

  it("refuses a redirect to the node", async () => {
    fetcher = devnetFetcher(node.url);
    target = `${node.url}/`;
    const error = await refusal(fetcher.fetch({ url: `${redirector.url}/` }));
    expect(error).toMatchObject({ reason: "destination_not_allowed", details: { kind: "backend" } });
  });

  it("refuses the node named by an address of this machine's network interfaces, where it listens on all", async () => {
    const own = Object.values(networkInterfaces())
      .flat()
      .find((found) => found && !found.internal && found.family === "IPv4")?.address;
    expect(own, "this machine has a non-loopback IPv4 interface").toBeDefined();
    const everywhere = await startServer("0.0.0.0", (_req, res) => json(res, 200, { result: null }));
    try {
      fetcher = new OutboundFetcher({
        // Its own network exempt, as an operator may allow its LAN; the node configured by loopback.
        allow: [`${own}/32`],
        backends: [`http://127.0.0.1:${everywhere.port}`],
      });
      const error = await refusal(fetcher.fetch({ url: `http://${own}:${everywhere.port}/` }));
      expect(error).toMatchObject({ reason: "destination_not_allowed", details: { kind: "backend" } });
      expect(everywhere.requests).toEqual([]);
    } finally {
      await everywhere.close();
    }
  });

  it("fails closed while a backend's name does not resolve: any exempt address on its port is refused", async () => {
    const names: Record<string, string[]> = { "rebound.example": ["127.0.0.1"] };
    fetcher = new OutboundFetcher({
      allow: ["127.0.0.0/8", "rebound.example"],
      resolve: async (hostname) => {
        const addresses = names[hostname];
        if (!addresses)
          throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" });
        return addresses.map((address) => ({ address, family: 4 as const }));
      },
      backends: [`http://node.internal:${node.port}`],
    });
    const error = await refusal(fetcher.fetch({ url: `${node.url}/` }));
    expect(error).toMatchObject({ reason: "destination_not_allowed", details: { kind: "backend" } });
    // Once the name resolves (elsewhere), the node's port on loopback is another server's again: reached.
    names["node.internal"] = ["10.9.9.9"];
    const reached = await fetcher.fetch({ url: `http://rebound.example:${node.port}/` }).then(
      () => "answered",
      (e: AppError) => e.reason,
    );
    expect(reached).toBe("answered");
    // The check after each test is for the node as a backend, which it was not here.
    node.requests.length = 0;
  });

  it("leaves a backend on a public address reachable: a CDN's address serves many sites", async () => {
    // An RPC provider and an x402 resource behind one public address. Whether anything answers there depends
    // on the network this runs in (nothing, or a proxy); what matters is that the guard let the request go.
    fetcher = new OutboundFetcher({
      resolve: tableResolver({ "rpc.example": ["93.184.216.34"], "shop.example": ["93.184.216.34"] }),
      backends: ["http://rpc.example:8545"],
      timeoutMs: 300,
    });
    const outcome = await fetcher.fetch({ url: "http://shop.example:8545/" }).then(
      () => "answered",
      (error: AppError) => error.reason,
    );
    expect(outcome).not.toBe("destination_not_allowed");
  });

  it("still reaches another exempt loopback server", async () => {
    fetcher = devnetFetcher(node.url);
    const response = await fetcher.fetch({ url: `${elsewhere.url}/` });
    expect(response.status).toBe(200);
    expect(elsewhere.requests).toHaveLength(1);
  });
});

describe("checkDestination (a webhook endpoint's URL, checked when it is created)", () => {
  const backend = "http://127.0.0.1:8545";
  const checker = (resolve: Resolver, options: { timeoutMs?: number } = {}) =>
    new OutboundFetcher({ allow: ["127.0.0.0/8", "localhost"], backends: [backend], resolve, ...options });
  const names = tableResolver({
    "public.example": ["93.184.216.34"],
    "mixed.example": ["93.184.216.34", "10.0.0.7"],
    "node.example": ["127.0.0.1"],
    localhost: ["127.0.0.1"],
  });

  it.each([
    ["an address the guard refuses", "http://10.0.0.7/hook", "private"],
    ["a name with a private address among public ones", "https://mixed.example/hook", "private"],
    ["the service's backend, by address", `${backend}/`, "backend"],
    ["the service's backend, by a name exempt by name", "http://localhost:8545/", "backend"],
    ["the service's backend, by a name resolving to it", "http://node.example:8545/", "backend"],
  ])("refuses %s, without telling what a name resolves to", async (_name, url, kind) => {
    const fetcher = checker(names);
    try {
      const error = await refusal(fetcher.checkDestination(url));
      expect(error).toMatchObject({ status: 400, reason: "destination_not_allowed", details: { kind } });
      if (isIP(new URL(url).hostname) === 0) expect(error.message).not.toMatch(/10\.0\.0\.7|127\.0\.0\.1/);
    } finally {
      await fetcher.close();
    }
  });

  it("takes a public name, another exempt port, and a name that does not resolve (each delivery checks it again)", async () => {
    const failing: Resolver = async () => {
      throw Object.assign(new Error("getaddrinfo EAI_AGAIN"), { code: "EAI_AGAIN" });
    };
    const fetcher = checker(names);
    const unresolvable = checker(failing);
    try {
      for (const url of ["https://public.example/hook", "http://127.0.0.1:9000/hook", "https://nx.example/"])
        expect((await fetcher.checkDestination(url)).href).toBe(url);
      expect((await unresolvable.checkDestination("https://flaky.example/")).href).toBe(
        "https://flaky.example/",
      );
    } finally {
      await Promise.all([fetcher.close(), unresolvable.close()]);
    }
  });

  it("stops waiting for a backend's name that never resolves, and refuses by the guard without waiting for it", async () => {
    const resolve: Resolver = async (hostname) => {
      if (hostname === "rpc.provider.example") return new Promise<never>(() => {});
      return names(hostname);
    };
    const fetcher = new OutboundFetcher({
      resolve,
      backends: ["https://rpc.provider.example/v2/KEY"],
      timeoutMs: 200,
    });
    try {
      const checked = fetcher.checkDestination("https://93.184.216.34/hook");
      const waited = new Promise((resolve) => setTimeout(resolve, 5_000, "still waiting"));
      expect(await Promise.race([checked.then((url) => url.href), waited])).toBe(
        "https://93.184.216.34/hook",
      );
      const error = await refusal(fetcher.checkDestination("https://mixed.example/hook"));
      expect(error).toMatchObject({ reason: "destination_not_allowed", details: { kind: "private" } });
    } finally {
      await fetcher.close();
    }
  });

  it("stops waiting for a name whose resolver never answers, and takes it", async () => {
    const fetcher = checker(() => new Promise<never>(() => {}), { timeoutMs: 200 });
    try {
      const checked = fetcher.checkDestination("https://silent.example/hook");
      const waited = new Promise((resolve) => setTimeout(resolve, 5_000, "still waiting"));
      expect(await Promise.race([checked.then((url) => url.href), waited])).toBe(
        "https://silent.example/hook",
      );
    } finally {
      await fetcher.close();
    }
  });
});

describe("headersForOrigin (the paid retry sent where redirects led)", () => {
  const headers = { Authorization: "Bearer t", cookie: "c=1", "X-Payment": "p", "x-other": "kept" };

  it("keeps every header on the same origin", () => {
    expect(headersForOrigin(headers, "https://a.example/x", "https://a.example/y")).toEqual(headers);
  });

  it("drops credentials and payments for another origin, http to https included", () => {
    for (const to of ["https://b.example/x", "https://a.example/x", "http://a.example:8080/x"]) {
      expect(headersForOrigin(headers, "http://a.example/x", to)).toEqual({ "x-other": "kept" });
    }
  });
});
