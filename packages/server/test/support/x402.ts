import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * Has the facilitator at `facilitatorUrl` settle a payment for `requirement`, as a resource would: the
 * payment as its `PAYMENT-SIGNATURE` header's value (base64 JSON) or as the payload decoded.
 */
export async function settleAtFacilitator(
  facilitatorUrl: string,
  payment: unknown,
  requirement: unknown,
): Promise<{ success: boolean; transaction: string }> {
  const response = await fetch(`${facilitatorUrl}/settle`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      x402Version: 2,
      paymentPayload:
        typeof payment === "string" ? JSON.parse(Buffer.from(payment, "base64").toString("utf8")) : payment,
      paymentRequirements: requirement,
    }),
  });
  return (await response.json()) as { success: boolean; transaction: string };
}

/** A payment a keeper was sent: the amount it asked (atomic units), the payload, and the requirement. */
export interface KeptPayment {
  amount: bigint;
  payload: unknown;
  requirement: Record<string, unknown>;
}

/**
 * A paid resource that keeps what it is paid with: `GET /<amount>` asks that many atomic units by
 * `requirement(amount)` and answers any payment with its 402 again ("kept_for_later"), settling nothing; the
 * payments it was sent are in `kept`, to settle at the facilitator whenever a test chooses.
 * @example const keeper = await startPaymentKeeper((amount) => ({ scheme: "exact", amount: String(amount), … }));
 */
export async function startPaymentKeeper(
  requirement: (amount: bigint) => Record<string, unknown>,
): Promise<{ url: string; kept: KeptPayment[]; close(): Promise<void> }> {
  const kept: KeptPayment[] = [];
  const keeper = createServer((req, res) => {
    const amount = BigInt(new URL(req.url ?? "/", "http://keeper").pathname.slice(1));
    const asked = requirement(amount);
    const signature = req.headers["payment-signature"];
    if (typeof signature === "string") {
      const payload = JSON.parse(Buffer.from(signature, "base64").toString("utf8"));
      kept.push({ amount, payload, requirement: asked });
    }
    const challenge = Buffer.from(
      JSON.stringify({
        x402Version: 2,
        error: "payment_required",
        resource: { url: `http://127.0.0.1${req.url}` },
        accepts: [asked],
      }),
    ).toString("base64");
    res
      .writeHead(402, { "payment-required": challenge, "content-type": "application/json" })
      .end(JSON.stringify({ error: signature ? "kept_for_later" : "payment_required" }));
  });
  await new Promise<void>((resolve) => keeper.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(keeper.address() as AddressInfo).port}`,
    kept,
    close: () => new Promise<void>((resolve) => keeper.close(() => resolve())),
  };
}
