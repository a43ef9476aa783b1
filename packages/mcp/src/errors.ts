import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { SvcError } from "@svc/sdk";

/** What a tool error carries: the service's own message, code and reason (and its numbers, e.g. a limit). */
export interface ToolErrorFacts {
  code: string;
  message: string;
  reason?: string;
  requestId?: string;
  details?: Record<string, unknown>;
}

/** A tool error (isError) the model can read and explain: the message first, then the facts as JSON. */
export function toolError(facts: ToolErrorFacts): CallToolResult {
  return {
    isError: true,
    content: [
      { type: "text", text: facts.message },
      { type: "text", text: JSON.stringify({ error: facts }) },
    ],
  };
}

/** An SDK error as a tool error; anything else is not ours to describe and is rethrown. */
export function toolErrorFrom(error: unknown): CallToolResult {
  if (!(error instanceof SvcError)) throw error;
  return toolError({
    code: error.code,
    message: error.message,
    ...(error.reason === undefined ? {} : { reason: error.reason }),
    ...(error.requestId === undefined ? {} : { requestId: error.requestId }),
    ...(error.details === undefined ? {} : { details: error.details }),
  });
}
