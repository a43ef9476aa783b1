import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { parseDecimal } from "./decimal.ts";

/** The person's answer to a spend confirmation; `refused` says why nothing was asked or nothing was paid. */
export type Confirmation = { confirmed: true } | { confirmed: false; reason: string; message: string };

/**
 * Asks the person (MCP elicitation) before a spend worth more than `confirmAboveUsd`. A client that cannot
 * elicit gets a refusal saying why: the spend is never made unconfirmed.
 */
export async function confirmSpend(
  server: McpServer,
  confirmAboveUsd: string | undefined,
  spendUsd: { value: bigint; scale: bigint },
  summary: string,
): Promise<Confirmation> {
  if (confirmAboveUsd === undefined) return { confirmed: true };
  const threshold = parseDecimal(confirmAboveUsd);
  if (threshold === undefined) throw new Error("confirmAboveUsd must be a decimal string");
  // value/scale > threshold.value/threshold.scale, exactly.
  if (spendUsd.value * threshold.scale <= threshold.value * spendUsd.scale) return { confirmed: true };
  if (server.server.getClientCapabilities()?.elicitation === undefined) {
    return {
      confirmed: false,
      reason: "confirmation_unavailable",
      message: `${summary} is above $${confirmAboveUsd}, which needs the person's confirmation (SVC_MCP_CONFIRM_ABOVE), and this MCP client cannot ask (it does not support elicitation); nothing was sent`,
    };
  }
  const answer = await server.server.elicitInput({
    mode: "form",
    message: `${summary}. Confirm this spend?`,
    requestedSchema: {
      type: "object",
      properties: { confirm: { type: "boolean", title: "Make this payment", default: false } },
      required: ["confirm"],
    },
  });
  if (answer.action === "accept" && answer.content?.confirm === true) return { confirmed: true };
  return {
    confirmed: false,
    reason: "confirmation_declined",
    message: `The person did not confirm: ${summary}; nothing was sent`,
  };
}
