import { randomBytes } from "node:crypto";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import express from "express";
import { privateKeyToAddress } from "viem/accounts";
import { type FacilitatorDevnet, type LocalFacilitator, startLocalFacilitator } from "./facilitator.ts";
import { evmNetwork } from "./networks.ts";
import { type ResourceServer, startResourceServerV2 } from "./resource-server.ts";

/** The devnet facts the demo needs: the facilitator's, and the EVM chain's id and USDC. */
export type DemoDevnet = FacilitatorDevnet & {
  readonly evm: {
    readonly chainId: number;
    readonly usdc: string;
    readonly usdcEip712: { readonly name: string; readonly version: string };
  };
};

/** A running local x402 demo. */
export interface LocalDemo {
  /** The paid resource, x402 v2 (`PAYMENT-REQUIRED`), served by `@x402/express`. */
  readonly url: string;
  /** The same resource over x402 v1 (402 JSON body, `X-PAYMENT`). */
  readonly v1Url: string;
  /** The facilitator that settles both on the devnet and lists both in its discovery. */
  readonly facilitator: LocalFacilitator;
  /** Who the demo's payments go to. */
  readonly payTo: `0x${string}`;
  /** Atomic USDC units per request. */
  readonly price: string;
  stop(): Promise<void>;
}

/** What the demo sells: 0.01 USDC per request. */
const DEMO_PRICE = "10000";
const DEMO_BODY = {
  city: "Lisbon",
  forecast: "sunny",
  celsius: 21,
  note: "paid data from the local x402 demo",
};
const DESCRIPTION = "Today's weather in Lisbon (local x402 demo)";

/**
 * Starts the local x402 demo on 127.0.0.1: a facilitator settling on the devnet, and a paid resource
 * (`GET /weather`, 0.01 USDC on the devnet's EVM chain) over v2 from `@x402/express` and, as a twin, over
 * v1. Both are listed in the facilitator's discovery (`GET /discovery/resources`).
 *
 * The v1 twin speaks v1 on the wire (the challenge in a 402 JSON body with `maxAmountRequired`, the payment
 * in `X-PAYMENT`, the receipt in `X-PAYMENT-RESPONSE`) but names the chain by its CAIP-2 id: v1's closed
 * list of names has none for a local chain, so `x402-express` 1.2 cannot serve it. It settles through the
 * facilitator's v2 endpoints (the `exact` EVM payload is the same in both versions).
 *
 * The Solana side is not offered: `@x402/svm` accepts only the public Solana ids, and the devnet profile's
 * `solana` chain has its own.
 *
 * @example
 * ```ts
 * const demo = await startLocalDemo(devnet);
 * (await fetch(demo.url)).status; // 402
 * ```
 */
export async function startLocalDemo(devnet: DemoDevnet): Promise<LocalDemo> {
  const facilitator = await startLocalFacilitator(devnet);
  const payTo = privateKeyToAddress(`0x${randomBytes(32).toString("hex")}`);
  const requirement = {
    scheme: "exact",
    network: evmNetwork(devnet.evm.chainId),
    amount: DEMO_PRICE,
    asset: devnet.evm.usdc,
    payTo,
    maxTimeoutSeconds: 60,
    extra: { ...devnet.evm.usdcEip712 },
  };
  let v2: ResourceServer | undefined;
  let v1: { url: string; stop(): Promise<void> } | undefined;
  try {
    v2 = await startResourceServerV2(facilitator.url, [
      {
        path: "/weather",
        description: DESCRIPTION,
        body: DEMO_BODY,
        accepts: [
          {
            network: requirement.network,
            payTo,
            amount: DEMO_PRICE,
            asset: devnet.evm.usdc,
            extra: requirement.extra,
          },
        ],
      },
    ]);
    v1 = await startV1Twin(facilitator.url, requirement);
  } catch (error) {
    await v2?.stop();
    await facilitator.stop();
    throw error;
  }
  const tags = ["weather", "demo"];
  facilitator.listResource({
    resource: `${v2.url}/weather`,
    x402Version: 2,
    description: DESCRIPTION,
    mimeType: "application/json",
    tags,
    accepts: [requirement],
  });
  const { amount, ...rest } = requirement;
  facilitator.listResource({
    resource: `${v1.url}/weather`,
    x402Version: 1,
    description: `${DESCRIPTION}, x402 v1`,
    mimeType: "application/json",
    tags,
    accepts: [{ ...rest, maxAmountRequired: amount }],
  });
  const servers = { v1, v2 };
  return {
    url: `${v2.url}/weather`,
    v1Url: `${v1.url}/weather`,
    facilitator,
    payTo,
    price: DEMO_PRICE,
    async stop() {
      await Promise.all([servers.v1.stop(), servers.v2.stop()]);
      await facilitator.stop();
    },
  };
}

/** The v1 twin of `GET /weather` (see {@link startLocalDemo}). */
async function startV1Twin(
  facilitatorUrl: string,
  requirement: Record<string, unknown> & { amount: string },
): Promise<{ url: string; stop(): Promise<void> }> {
  const app = express();
  let url = "";
  app.get("/weather", async (req, res) => {
    const { amount, ...rest } = requirement;
    const challenge = (error: string) => ({
      x402Version: 1,
      error,
      accepts: [
        {
          ...rest,
          maxAmountRequired: amount,
          resource: `${url}/weather`,
          description: `${DESCRIPTION}, x402 v1`,
          mimeType: "application/json",
        },
      ],
    });
    const header = req.header("x-payment");
    if (!header) {
      res.status(402).json(challenge("X-PAYMENT header is required"));
      return;
    }
    let payment: { payload?: unknown };
    try {
      payment = JSON.parse(Buffer.from(header, "base64").toString("utf8"));
    } catch {
      res.status(402).json(challenge("X-PAYMENT is not base64 of JSON"));
      return;
    }
    const body = JSON.stringify({
      x402Version: 2,
      paymentPayload: {
        x402Version: 2,
        resource: { url: `${url}/weather` },
        accepted: requirement,
        payload: payment.payload,
      },
      paymentRequirements: requirement,
    });
    const post = async (path: string) =>
      (await (
        await fetch(`${facilitatorUrl}${path}`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body,
        })
      ).json()) as Record<string, unknown>;
    try {
      const verified = await post("/verify");
      if (verified.isValid !== true) {
        res.status(402).json(challenge(String(verified.invalidReason ?? "invalid_payment")));
        return;
      }
      const settled = await post("/settle");
      const receipt = Buffer.from(
        JSON.stringify({
          success: settled.success === true,
          transaction: settled.transaction ?? "",
          network: requirement.network,
          payer: settled.payer,
          ...(settled.errorReason ? { errorReason: settled.errorReason } : {}),
        }),
        "utf8",
      ).toString("base64");
      res.setHeader("X-PAYMENT-RESPONSE", receipt);
      if (settled.success !== true) {
        res.status(402).json(challenge(String(settled.errorReason ?? "settlement_failed")));
        return;
      }
      res.json(DEMO_BODY);
    } catch (error) {
      res.status(502).json({ error: error instanceof Error ? error.message : String(error) });
    }
  });
  const server: Server = app.listen(0, "127.0.0.1");
  await new Promise<void>((resolve, reject) => {
    server.once("listening", resolve);
    server.once("error", reject);
  });
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  let stopping: Promise<void> | undefined;
  return {
    url,
    stop() {
      stopping ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return stopping;
    },
  };
}
