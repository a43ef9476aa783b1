import type { Server } from "node:http";
import { isAddress } from "@solana/kit";
import { type WebSocket, WebSocketServer } from "ws";
import type { Commitment } from "./ledger.ts";
import { encodeAccount, type MethodContext } from "./methods.ts";
import { RPC_ERROR, RpcError } from "./rpc-error.ts";
import { stringifyRpc } from "./rpc-json.ts";

type Subscription =
  | { kind: "slot"; socket: WebSocket; lastSlot: bigint }
  | { kind: "signature"; socket: WebSocket; signature: string; commitment: Commitment }
  | {
      kind: "account";
      socket: WebSocket;
      address: string;
      commitment: Commitment;
      config: Record<string, unknown>;
      last: string;
    };

function commitmentOf(config: unknown): Commitment {
  if (typeof config === "object" && config !== null && "commitment" in config) {
    const c = config.commitment;
    if (c === "processed" || c === "confirmed" || c === "finalized") return c;
    throw new RpcError(RPC_ERROR.invalidParams, `Invalid params: unknown commitment \`${String(c)}\``);
  }
  return "finalized";
}

/**
 * The cluster's websocket subscriptions (`slotSubscribe`, `signatureSubscribe`, `accountSubscribe` and their
 * unsubscribes) on the same port as the HTTP endpoint, enough for kit's `createSolanaRpcSubscriptions` and
 * `sendAndConfirmTransactionFactory`.
 */
export function attachSubscriptions(server: Server, ctx: MethodContext): { close(): void } {
  const wss = new WebSocketServer({ server });
  // The HTTP server's errors are passed on here too; its own listen reports them (a port in use).
  wss.on("error", () => {});
  const subscriptions = new Map<number, Subscription>();
  let nextId = 0;
  const { ledger } = ctx;

  const notify = (socket: WebSocket, method: string, subscription: number, result: unknown): void => {
    if (socket.readyState === socket.OPEN) {
      socket.send(stringifyRpc({ jsonrpc: "2.0", method, params: { result, subscription } }));
    }
  };

  const accountKey = (address: string): string => {
    const account = ledger.account(address);
    return account === null
      ? "none"
      : `${account.lamports}:${account.owner}:${Buffer.from(account.data).toString("base64")}`;
  };

  const onChange = (): void => {
    for (const [id, sub] of subscriptions) {
      if (sub.kind === "slot") {
        const slot = ledger.slot;
        if (slot > sub.lastSlot) {
          sub.lastSlot = slot;
          notify(sub.socket, "slotNotification", id, {
            parent: slot - 1n,
            root: ledger.slotAt("finalized"),
            slot,
          });
        }
      } else if (sub.kind === "signature") {
        const landed = ledger.transaction(sub.signature, sub.commitment);
        if (landed !== undefined) {
          subscriptions.delete(id);
          notify(sub.socket, "signatureNotification", id, {
            context: { slot: ledger.slotAt(sub.commitment) },
            value: { err: landed.err },
          });
        }
      } else {
        const key = accountKey(sub.address);
        if (key !== sub.last) {
          sub.last = key;
          const account = ledger.account(sub.address);
          notify(sub.socket, "accountNotification", id, {
            context: { slot: ledger.slotAt(sub.commitment) },
            value: account === null ? null : encodeAccount(ctx, account, sub.config),
          });
        }
      }
    }
  };
  const unsubscribeLedger = ledger.onChange(onChange);

  const subscribe = (socket: WebSocket, method: string, params: readonly unknown[]): unknown => {
    switch (method) {
      case "slotSubscribe":
        subscriptions.set(nextId, { kind: "slot", socket, lastSlot: ledger.slot });
        return nextId++;
      case "signatureSubscribe": {
        const signature = params[0];
        if (typeof signature !== "string") throw new RpcError(RPC_ERROR.invalidParams, "Invalid params");
        subscriptions.set(nextId, {
          kind: "signature",
          socket,
          signature,
          commitment: commitmentOf(params[1]),
        });
        // Already there? Tell at once, as a node does when the status is in its cache.
        queueMicrotask(onChange);
        return nextId++;
      }
      case "accountSubscribe": {
        const address = params[0];
        if (typeof address !== "string" || !isAddress(address)) {
          throw new RpcError(RPC_ERROR.invalidParams, "Invalid param: Invalid");
        }
        const config =
          typeof params[1] === "object" && params[1] !== null ? (params[1] as Record<string, unknown>) : {};
        subscriptions.set(nextId, {
          kind: "account",
          socket,
          address,
          commitment: commitmentOf(config),
          config: { encoding: config.encoding ?? "base64" },
          last: accountKey(address),
        });
        return nextId++;
      }
      case "slotUnsubscribe":
      case "signatureUnsubscribe":
      case "accountUnsubscribe": {
        const id = Number(params[0]);
        const sub = subscriptions.get(id);
        if (sub === undefined || sub.socket !== socket) {
          throw new RpcError(RPC_ERROR.invalidParams, "Invalid subscription id.");
        }
        subscriptions.delete(id);
        return true;
      }
      default:
        throw new RpcError(RPC_ERROR.methodNotFound, "Method not found");
    }
  };

  wss.on("connection", (socket) => {
    socket.on("message", (raw) => {
      let id: unknown = null;
      try {
        let request: unknown;
        try {
          request = JSON.parse(String(raw));
        } catch {
          throw new RpcError(RPC_ERROR.parseError, "Parse error");
        }
        if (typeof request !== "object" || request === null) {
          throw new RpcError(RPC_ERROR.invalidRequest, "Invalid request");
        }
        const r = request as Record<string, unknown>;
        id = r.id ?? null;
        if (typeof r.method !== "string") throw new RpcError(RPC_ERROR.invalidRequest, "Invalid request");
        const params = Array.isArray(r.params) ? (r.params as unknown[]) : [];
        const result = subscribe(socket, r.method, params);
        socket.send(stringifyRpc({ jsonrpc: "2.0", result, id }));
      } catch (err) {
        const error =
          err instanceof RpcError
            ? { code: err.code, message: err.message }
            : { code: RPC_ERROR.internalError, message: "Internal error" };
        socket.send(stringifyRpc({ jsonrpc: "2.0", error, id }));
      }
    });
    socket.on("close", () => {
      for (const [subId, sub] of subscriptions) if (sub.socket === socket) subscriptions.delete(subId);
    });
  });

  return {
    close() {
      unsubscribeLedger();
      for (const client of wss.clients) client.terminate();
      wss.close();
    },
  };
}
