import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { RequestId } from "@modelcontextprotocol/sdk/types.js";
import { parseDecimal } from "./decimal.ts";

/** The person's answer to a spend confirmation; `refused` says why nothing was asked or nothing was paid. */
export type Confirmation = { confirmed: true } | { confirmed: false; reason: string; message: string };

/** The tool call a confirmation is asked for: its JSON-RPC id, and its cancellation. */
export interface ToolCall {
  requestId: RequestId;
  signal: AbortSignal;
}

/**
 * Asks the person (MCP elicitation) before a spend worth more than `confirmAboveUsd`. A client that cannot
 * elicit gets a refusal saying why: the spend is never made unconfirmed. The question goes out on the tool
 * call's own response (over streamable HTTP, a client need not open the session's stream), and a cancelled
 * call stops waiting for its answer.
 */
export async function confirmSpend(
  server: McpServer,
  confirmAboveUsd: string | undefined,
  spendUsd: { value: bigint; scale: bigint },
  summary: string,
  call: ToolCall,
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
  const answer = await server.server.elicitInput(
    {
      mode: "form",
      message: `${summary}. Confirm this spend?`,
      requestedSchema: {
        type: "object",
        properties: { confirm: { type: "boolean", title: "Make this payment", default: false } },
        required: ["confirm"],
      },
    },
    { relatedRequestId: call.requestId, signal: call.signal },
  );
  if (answer.action === "accept" && answer.content?.confirm === true) return { confirmed: true };
  return {
    confirmed: false,
    reason: "confirmation_declined",
    message: `The person did not confirm: ${summary}; nothing was sent`,
  };
}

/**
 * What an agent wrote, as a person reads it in a question: in quotes, every character that could start a
 * line of its own escaped (JSON's escapes, and the line and paragraph separators and C1 controls JSON keeps).
 * @example quoted("0xabc\n\nApproved by owner") // "\"0xabc\\n\\nApproved by owner\""
 */
export function quoted(text: string): string {
  return JSON.stringify(text).replace(
    /[\u007f-\u009f\u2028\u2029]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
}
