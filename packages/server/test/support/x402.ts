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
