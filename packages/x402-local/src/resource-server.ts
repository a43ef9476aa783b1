import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { HTTPFacilitatorClient } from "@x402/core/server";
import { ExactEvmScheme } from "@x402/evm/exact/server";
import { paymentMiddleware, x402ResourceServer } from "@x402/express";
import { ExactSvmScheme } from "@x402/svm/exact/server";
import express, { type Express } from "express";
import { paymentMiddleware as paymentMiddlewareV1 } from "x402-express";

/** One way to pay for a v2 route: an `accepts` entry before the server adds what the facilitator supplies. */
export interface PaymentOffer {
  /** CAIP-2 id: `eip155:<chain id>` or Solana devnet's id. */
  readonly network: string;
  readonly payTo: string;
  /** Atomic units of `asset`, as a decimal string. */
  readonly amount: string;
  /** Token contract (EVM) or mint (Solana). */
  readonly asset: string;
  /** EVM: the token's EIP-712 `{ name, version }`; the Solana scheme adds `feePayer` itself. */
  readonly extra?: Record<string, unknown>;
  /** Default 60. */
  readonly maxTimeoutSeconds?: number;
}

/** A paid route of a v2 server: `GET <path>` answers `body` as JSON once paid with one of `accepts`. */
export interface PaidRouteV2 {
  readonly path: string;
  readonly accepts: readonly PaymentOffer[];
  readonly body: unknown;
  readonly description?: string;
}

/** A running resource server. */
export interface ResourceServer {
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  /** Paid requests served so far (the handler behind the paywall ran), by path. */
  readonly served: ReadonlyMap<string, number>;
  stop(): Promise<void>;
}

/** Options shared by both servers. */
export interface ResourceServerOptions {
  /** Port on 127.0.0.1; default 0 (a free port). */
  readonly port?: number;
  /** Unpaid routes: `GET <path>` answers the JSON body, for comparisons with a paid fetch. */
  readonly free?: Readonly<Record<string, unknown>>;
}

/**
 * Starts a v2 resource server built from the reference packages: `@x402/express`'s `paymentMiddleware` over
 * an `x402ResourceServer` with the `exact` schemes of `@x402/evm` and `@x402/svm`, verifying and settling
 * through the facilitator at `facilitatorUrl`. Challenges carry `PAYMENT-REQUIRED`; receipts
 * `PAYMENT-RESPONSE`.
 *
 * @example
 * ```ts
 * const server = await startResourceServerV2(facilitator.url, [{
 *   path: "/weather",
 *   accepts: [{ network: "eip155:31337", payTo, amount: "10000", asset: devnet.evm.usdc, extra: devnet.evm.usdcEip712 }],
 *   body: { forecast: "sunny" },
 * }]);
 * (await fetch(`${server.url}/weather`)).status; // 402
 * ```
 */
export async function startResourceServerV2(
  facilitatorUrl: string,
  routes: readonly PaidRouteV2[],
  options: ResourceServerOptions = {},
): Promise<ResourceServer> {
  const resourceServer = new x402ResourceServer(new HTTPFacilitatorClient({ url: facilitatorUrl }))
    .register("eip155:*", new ExactEvmScheme())
    .register("solana:*", new ExactSvmScheme());
  const config = Object.fromEntries(
    routes.map((route) => [
      `GET ${route.path}`,
      {
        accepts: route.accepts.map((offer) => ({
          scheme: "exact",
          network: offer.network as `${string}:${string}`,
          payTo: offer.payTo,
          price: {
            amount: offer.amount,
            asset: offer.asset,
            ...(offer.extra === undefined ? {} : { extra: offer.extra }),
          },
          maxTimeoutSeconds: offer.maxTimeoutSeconds ?? 60,
        })),
        description: route.description ?? `Paid resource ${route.path}`,
        mimeType: "application/json",
      },
    ]),
  );
  const app = express();
  // Syncs with the facilitator's /supported on the first request (Solana's feePayer comes from there).
  app.use(paymentMiddleware(config, resourceServer));
  return listen(app, routes, options);
}

/** A paid route of a v1 server. */
export interface PaidRouteV1 {
  readonly path: string;
  /** A v1 network name: `base-sepolia` (an anvil started with chain id 84532) or `solana-devnet`. */
  readonly network: "base-sepolia" | "solana-devnet";
  readonly payTo: string;
  /** Atomic units, as a decimal string. */
  readonly amount: string;
  /** The token: EVM with its EIP-712 domain (challenges carry it as `extra`), Solana without. */
  readonly asset: {
    readonly address: string;
    readonly decimals: number;
    readonly eip712?: { readonly name: string; readonly version: string };
  };
  readonly body: unknown;
  readonly description?: string;
}

/**
 * Starts a v1 resource server with the legacy `x402-express` 1.2 middleware, one per route (v1 names one
 * payee per middleware). Challenges are 402 JSON bodies; payments arrive in `X-PAYMENT`; receipts leave in
 * `X-PAYMENT-RESPONSE`.
 *
 * @example
 * ```ts
 * const server = await startResourceServerV1(facilitator.url, [{
 *   path: "/weather", network: "base-sepolia", payTo, amount: "10000",
 *   asset: { address: devnet.evm.usdc, decimals: 6, eip712: devnet.evm.usdcEip712 }, body: { forecast: "sunny" },
 * }]);
 * ```
 */
export async function startResourceServerV1(
  facilitatorUrl: string,
  routes: readonly PaidRouteV1[],
  options: ResourceServerOptions = {},
): Promise<ResourceServer> {
  const app = express();
  for (const route of routes) {
    app.use(
      paymentMiddlewareV1(
        route.payTo as `0x${string}`,
        {
          [`GET ${route.path}`]: {
            price: {
              amount: route.amount,
              asset: {
                address: route.asset.address,
                decimals: route.asset.decimals,
                ...(route.asset.eip712 === undefined ? {} : { eip712: route.asset.eip712 }),
              } as never,
            },
            network: route.network,
            config: { description: route.description ?? `Paid resource ${route.path}` },
          },
        },
        { url: facilitatorUrl as `${string}://${string}` },
      ),
    );
  }
  return listen(app, routes, options);
}

async function listen(
  app: Express,
  routes: readonly { path: string; body: unknown }[],
  options: ResourceServerOptions,
): Promise<ResourceServer> {
  const served = new Map<string, number>();
  for (const route of routes) {
    app.get(route.path, (_req, res) => {
      served.set(route.path, (served.get(route.path) ?? 0) + 1);
      res.json(route.body);
    });
  }
  for (const [path, body] of Object.entries(options.free ?? {})) {
    app.get(path, (_req, res) => {
      res.json(body);
    });
  }
  const server: Server = app.listen(options.port ?? 0, "127.0.0.1");
  await new Promise<void>((resolve, reject) => {
    server.once("listening", resolve);
    server.once("error", reject);
  });
  const { port } = server.address() as AddressInfo;
  let stopping: Promise<void> | undefined;
  return {
    url: `http://127.0.0.1:${port}`,
    served,
    stop() {
      stopping ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return stopping;
    },
  };
}
