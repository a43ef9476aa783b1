import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/** One request a receiver got. */
export interface Received {
  headers: IncomingHttpHeaders;
  body: string;
  /** The status it was answered with. */
  answered: number;
}

/**
 * A real HTTP receiver of webhooks on 127.0.0.1: it keeps every request and answers each with what `answer`
 * says (200 unless told otherwise).
 * @example const receiver = await new WebhookReceiver().listen(); … receiver.requests[0]?.body
 */
export class WebhookReceiver {
  readonly requests: Received[] = [];
  answer: (request: { headers: IncomingHttpHeaders; body: string }) => number = () => 200;
  /** How long it takes to answer each request. */
  delayMs = 0;
  /** Requests received so far, those not answered yet included. */
  arrived = 0;
  /** Requests whose connection is open now (not answered, nor given up by the sender), and the most at once. */
  open = 0;
  mostOpen = 0;
  /** What the answer's body is: a word; 3 MB; or a byte every half second, without end. */
  answerBody: "short" | "huge" | "endless" = "short";
  readonly #server: Server;
  url = "";

  constructor() {
    this.#server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on("data", (chunk: Buffer) => chunks.push(chunk));
      request.on("end", () => {
        const body = Buffer.concat(chunks).toString("utf8");
        this.arrived++;
        this.open++;
        this.mostOpen = Math.max(this.mostOpen, this.open);
        response.on("close", () => this.open--);
        setTimeout(() => {
          const answered = this.answer({ headers: request.headers, body });
          this.requests.push({ headers: request.headers, body, answered });
          response.writeHead(answered, { "content-type": "text/plain" });
          if (this.answerBody === "huge") response.end(Buffer.alloc(3 * 1024 * 1024, "x"));
          else if (this.answerBody === "endless") {
            response.write("x");
            const drip = setInterval(() => response.write("x"), 500);
            response.on("close", () => clearInterval(drip));
          } else response.end(answered < 300 ? "ok" : `nope ${answered}`);
        }, this.delayMs);
      });
    });
  }

  async listen(): Promise<this> {
    await new Promise<void>((resolve) => this.#server.listen(0, "127.0.0.1", resolve));
    this.url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}/hooks`;
    return this;
  }

  /** The event ids acknowledged (answered 2xx), in the order they came. */
  acknowledged(): string[] {
    return this.requests.filter((r) => r.answered < 300).map((r) => String(r.headers["webhook-id"]));
  }

  types(): string[] {
    return this.requests.filter((r) => r.answered < 300).map((r) => JSON.parse(r.body).type as string);
  }

  close(): Promise<void> {
    this.#server.closeAllConnections();
    return new Promise((resolve) => this.#server.close(() => resolve()));
  }
}
