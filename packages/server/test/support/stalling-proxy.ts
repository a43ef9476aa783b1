import net from "node:net";

/**
 * A TCP proxy that can stall: while stalled, it keeps every connection open but forwards nothing, holding
 * the bytes (as a network that stops delivering does); when resumed, it delivers what it held, in order.
 * It stands between the service and a real server (Redis) to make that server stop answering.
 */
export class StallingProxy {
  readonly #server: net.Server;
  readonly #sockets = new Set<net.Socket>();
  readonly #held: (() => void)[] = [];
  #stalled = false;
  port = 0;

  private constructor(target: { host: string; port: number }) {
    this.#server = net.createServer((client) => {
      const upstream = net.connect(target.port, target.host);
      this.#sockets.add(client).add(upstream);
      const forward = (from: net.Socket, to: net.Socket) =>
        from.on("data", (chunk: Buffer) => {
          if (this.#stalled) this.#held.push(() => to.write(chunk));
          else to.write(chunk);
        });
      forward(client, upstream);
      forward(upstream, client);
      for (const [a, b] of [
        [client, upstream],
        [upstream, client],
      ] as const) {
        a.on("close", () => b.destroy());
        a.on("error", () => b.destroy());
      }
    });
  }

  static async start(target: { host: string; port: number }): Promise<StallingProxy> {
    const proxy = new StallingProxy(target);
    await new Promise<void>((resolve) => proxy.#server.listen(0, "127.0.0.1", resolve));
    proxy.port = (proxy.#server.address() as net.AddressInfo).port;
    return proxy;
  }

  /** Stops delivering anything in either direction; connections stay open. */
  stall(): void {
    this.#stalled = true;
  }

  /** Delivers what was held, in order, and forwards again. */
  resume(): void {
    this.#stalled = false;
    for (const deliver of this.#held.splice(0)) deliver();
  }

  async close(): Promise<void> {
    for (const socket of this.#sockets) socket.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}
