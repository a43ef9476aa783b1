import http from "node:http";
import type { AddressInfo } from "node:net";

/** One JSON-RPC request as the gate sees it: its method(s) and its raw body. */
export interface RpcCall {
  methods: string[];
  body: string;
}

/**
 * What the gate does with a request: pass it on, hold it until the test lets it go, cut its connection, or
 * answer it with `status` and `body` itself, as a gateway whose upstream was slow does, and hold it: let go,
 * it reaches the node all the same (its answer unread).
 */
export type RpcVerdict = "forward" | "hold" | "drop" | { gatewayAnswers: { status: number; body: string } };

/** A request the gate holds; the test forwards it or cuts it. */
export interface HeldCall extends RpcCall {
  release(): void;
  drop(): void;
  /** Answers it here, as the node would have: a JSON-RPC `body`, with HTTP 200. */
  answer(body: string): void;
  /**
   * What the node answers it now, asked on the side (the held request is neither sent on nor answered): a
   * test keeps it to answer with later, as a node behind the others would.
   */
  askNode(): Promise<string>;
  /** True once the client gave up waiting (closed the connection before an answer), e.g. its time limit. */
  readonly abandoned: boolean;
}

/**
 * An HTTP proxy in front of a real chain's JSON-RPC endpoint that decides, request by request, to forward,
 * hold or drop: the network between the service and its RPC node, the one part a test must steer to put a
 * request "in flight" at a chosen moment. The node behind it is real.
 */
export class RpcGate {
  readonly #server: http.Server;
  readonly #target: URL;
  readonly held: HeldCall[] = [];
  /** Decides each request; forwards everything by default. */
  decide: (call: RpcCall) => RpcVerdict = () => "forward";
  url = "";

  private constructor(targetUrl: string) {
    this.#target = new URL(targetUrl);
    this.#server = http.createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on("data", (chunk: Buffer) => chunks.push(chunk));
      request.on("end", () => {
        const body = Buffer.concat(chunks).toString("utf8");
        const call: RpcCall = { methods: methodsOf(body), body };
        const forward = () => this.#forward(request, body, response);
        const drop = () => request.socket.destroy();
        const askNode = async () =>
          (
            await fetch(new URL(request.url ?? "/", this.#target), {
              method: "POST",
              headers: { "content-type": "application/json" },
              body,
            })
          ).text();
        const verdict = this.decide(call);
        if (verdict === "forward") forward();
        else if (verdict === "drop") drop();
        else if (typeof verdict === "object") {
          const { status, body: answer } = verdict.gatewayAnswers;
          response.writeHead(status, { "content-type": "application/json" }).end(answer);
          const reachNode = () => this.#forward(request, body, undefined);
          this.held.push({
            ...call,
            release: reachNode,
            drop: () => {},
            answer: () => {},
            askNode,
            abandoned: false,
          });
        } else {
          const answer = (json: string) =>
            response.writeHead(200, { "content-type": "application/json" }).end(json);
          const held = { ...call, release: forward, drop, answer, askNode, abandoned: false };
          response.on("close", () => {
            if (!response.writableFinished) held.abandoned = true;
          });
          this.held.push(held);
        }
      });
    });
  }

  static async start(targetUrl: string): Promise<RpcGate> {
    const gate = new RpcGate(targetUrl);
    await new Promise<void>((resolve) => gate.#server.listen(0, "127.0.0.1", resolve));
    gate.url = `http://127.0.0.1:${(gate.#server.address() as AddressInfo).port}`;
    return gate;
  }

  /** Forwards everything from now on, the held requests first. */
  openUp(): void {
    this.decide = () => "forward";
    for (const call of this.held.splice(0)) call.release();
  }

  async close(): Promise<void> {
    this.openUp();
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  /** Sends the request on to the node, and its answer to `response` (none: the answer is read and dropped). */
  #forward(request: http.IncomingMessage, body: string, response: http.ServerResponse | undefined): void {
    const upstream = http.request(
      {
        host: this.#target.hostname,
        port: this.#target.port,
        path: request.url,
        method: request.method,
        headers: { "content-type": request.headers["content-type"] ?? "application/json" },
      },
      (answer) => {
        if (!response) {
          answer.resume();
          return;
        }
        response.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(response);
      },
    );
    upstream.on("error", () => (response ? request.socket.destroy() : undefined));
    upstream.end(body);
  }
}

function methodsOf(body: string): string[] {
  try {
    const parsed = JSON.parse(body) as { method?: unknown } | { method?: unknown }[];
    return (Array.isArray(parsed) ? parsed : [parsed]).map((call) => String(call.method));
  } catch {
    return [];
  }
}
