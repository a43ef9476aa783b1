import { connect, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Devnet, startDevnet } from "../src/index.ts";

let devnet: Devnet;

beforeAll(async () => {
  devnet = await startDevnet();
});
afterAll(() => devnet.stop());

/**
 * Longer than any HTTP client here keeps an idle connection (undici, behind Node's fetch: 4 s, or two
 * seconds less than the timeout the server advertises), and longer than the 5 s the Solana server used to
 * keep one: a server that closes an idle socket first races the client reusing it (ECONNRESET).
 */
const IDLE_MS = 7_000;

/** One JSON-RPC call written on `socket`; resolves with the status line of the answer. */
function call(socket: Socket, method: string): Promise<string> {
  const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method, params: [] });
  return new Promise((resolve, reject) => {
    let answer = "";
    const onData = (chunk: Buffer) => {
      answer += chunk.toString("utf8");
      const head = answer.indexOf("\r\n\r\n");
      const length = /content-length: (\d+)/i.exec(answer);
      const complete = length
        ? head >= 0 && answer.length >= head + 4 + Number(length[1])
        : answer.endsWith("\r\n0\r\n\r\n"); // chunked: the last chunk is empty
      if (complete) {
        socket.off("data", onData);
        socket.off("close", onClose);
        resolve(answer.split("\r\n")[0] ?? "");
      }
    };
    const onClose = () => reject(new Error(`the server closed the connection before answering ${method}`));
    socket.on("data", onData);
    socket.once("close", onClose);
    socket.write(
      `POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
  });
}

describe.concurrent("the devnet's RPC endpoints", () => {
  for (const [chain, method] of [
    ["solana", "getGenesisHash"],
    ["evm", "eth_chainId"],
  ] as const) {
    it(`${chain}: keep an idle keep-alive connection open longer than clients keep theirs`, async () => {
      const url = new URL(chain === "solana" ? devnet.solana.rpcUrl : devnet.evm.rpcUrl);
      const socket = connect(Number(url.port), url.hostname);
      try {
        expect(await call(socket, method)).toBe("HTTP/1.1 200 OK");
        await new Promise((resolve) => setTimeout(resolve, IDLE_MS));
        expect(socket.destroyed).toBe(false);
        expect(await call(socket, method)).toBe("HTTP/1.1 200 OK");
      } finally {
        socket.destroy();
      }
    });
  }
});
