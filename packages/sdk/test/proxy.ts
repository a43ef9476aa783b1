import net from "node:net";

/** What the proxy does to the next request whose request line matches. */
export type Fault =
  /** Forward the request; when the answer starts to come back, cut the connection (the answer is lost). */
  | "cut-response"
  /** Do not forward; answer 503 (as a load balancer in front of a busy service would). */
  | "answer-503"
  /** Forward the request; hold the answer back until the client gives up and closes. */
  | "hold-response";

/**
 * A TCP proxy in front of the service that injects one network fault into the next matching request. It
 * stands in for the network between an agent and the service (the one boundary a test cannot reach
 * otherwise); the service behind it is real.
 */
export class FaultProxy {
  readonly #server: net.Server;
  #plan: { pattern: RegExp; fault: Fault } | undefined;
  readonly #sockets = new Set<net.Socket>();
  /** Request lines seen, with their Idempotency-Key header when present. */
  readonly requests: { line: string; idempotencyKey: string | undefined }[] = [];
  url = "";

  #target: { host: string; port: number };

  private constructor(target: { host: string; port: number }) {
    this.#target = target;
    this.#server = net.createServer((client) => {
      const upstream = net.connect(this.#target.port, this.#target.host);
      this.#sockets.add(client).add(upstream);
      let fault: Fault | undefined;
      client.on("data", (chunk: Buffer) => {
        const text = chunk.toString("latin1");
        const line = /^[A-Z]+ \S+ HTTP\/1\.1/.exec(text)?.[0];
        if (line !== undefined) {
          const key = /\r\nidempotency-key: *([^\r\n]*)/i.exec(text)?.[1];
          this.requests.push({ line, idempotencyKey: key });
          if (this.#plan?.pattern.test(line)) {
            fault = this.#plan.fault;
            this.#plan = undefined;
            if (fault === "answer-503") {
              client.end(
                "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
              );
              upstream.destroy();
              return;
            }
          }
        }
        if (fault === "answer-503") return;
        upstream.write(chunk);
      });
      upstream.on("data", (chunk: Buffer) => {
        if (fault === "cut-response") {
          client.destroy();
          upstream.destroy();
          return;
        }
        if (fault === "hold-response") return;
        client.write(chunk);
      });
      client.on("close", () => upstream.destroy());
      upstream.on("close", () => client.destroy());
      client.on("error", () => upstream.destroy());
      upstream.on("error", () => client.destroy());
    });
  }

  /** Starts a proxy to `targetUrl` (http://host:port…) on a free port of 127.0.0.1. */
  static async start(targetUrl: string): Promise<FaultProxy> {
    const target = new URL(targetUrl);
    const proxy = new FaultProxy({ host: target.hostname, port: Number(target.port) });
    await new Promise<void>((resolve) => proxy.#server.listen(0, "127.0.0.1", resolve));
    const { port } = proxy.#server.address() as net.AddressInfo;
    proxy.url = `http://127.0.0.1:${port}`;
    return proxy;
  }

  /** Sends new connections to `targetUrl` from now on (the service behind it moved). */
  retarget(targetUrl: string): void {
    const target = new URL(targetUrl);
    this.#target = { host: target.hostname, port: Number(target.port) };
  }

  /** Injects `fault` into the next request whose request line ("POST /v1/… HTTP/1.1") matches `pattern`. */
  inject(pattern: RegExp, fault: Fault): void {
    this.#plan = { pattern, fault };
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.#server.close(() => resolve());
      // Kept-alive connections would hold close() open.
      for (const socket of this.#sockets) socket.destroy();
    });
  }
}
