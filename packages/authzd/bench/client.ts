import net from "node:net";

const HEADER_END = Buffer.from("\r\n\r\n");

/**
 * A minimal HTTP/1.1 keep-alive client for load generation: one connection, one request in flight,
 * a prebuilt request buffer. Node's `http.request` costs more CPU per call than the daemon spends on
 * a decision; on a 2-core machine that would measure the client, not the daemon.
 */
export class RawClient {
  private buffered: Buffer = Buffer.alloc(0);
  private pending: { resolve: (status: number) => void; reject: (error: Error) => void } | null = null;

  private constructor(private readonly socket: net.Socket) {
    socket.setNoDelay(true);
    socket.on("data", (chunk: Buffer) => this.onData(chunk));
    socket.on("error", (error) => this.pending?.reject(error));
    socket.on("close", () => this.pending?.reject(new Error("connection closed")));
  }

  /** Connects to `host:port`. */
  static connect(host: string, port: number): Promise<RawClient> {
    return new Promise((resolve, reject) => {
      const socket = net.connect(port, host, () => resolve(new RawClient(socket)));
      socket.once("error", reject);
    });
  }

  /** Sends `request` (a complete HTTP/1.1 request) and resolves with the response status. */
  send(request: Buffer): Promise<number> {
    return new Promise((resolve, reject) => {
      this.pending = { resolve, reject };
      this.socket.write(request);
    });
  }

  close(): void {
    this.socket.destroy();
  }

  private onData(chunk: Buffer): void {
    this.buffered = this.buffered.length === 0 ? chunk : Buffer.concat([this.buffered, chunk]);
    const end = this.buffered.indexOf(HEADER_END);
    if (end === -1) return;
    const head = this.buffered.toString("latin1", 0, end);
    const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
    const total = end + HEADER_END.length + length;
    if (this.buffered.length < total) return;
    this.buffered = this.buffered.subarray(total);
    const pending = this.pending;
    this.pending = null;
    pending?.resolve(Number(head.slice(9, 12)));
  }
}

/** Builds a POST request with a JSON body. */
export function buildPost(host: string, port: number, path: string, token: string, body: unknown): Buffer {
  const json = JSON.stringify(body);
  return Buffer.from(
    `POST ${path} HTTP/1.1\r\nHost: ${host}:${port}\r\nAuthorization: Bearer ${token}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(json)}\r\n\r\n${json}`,
  );
}
