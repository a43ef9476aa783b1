import { z } from "zod";
import { getAccount } from "../../../accounts/accounts.ts";
import { getApiKey, toApiKeyView } from "../../../api-keys/api-keys.ts";
import { apiKeyView, errorResponses, jsonResponse } from "../../schemas.ts";
import { type App, principalOf, type Services } from "../../types.ts";

const meView = z
  .object({
    userId: z.string().meta({ description: "the account the credential belongs to" }),
    email: z.string().optional().meta({
      description:
        "the account's email, told to an admin credential only: an agent or read key (a program reading untrusted text) is not given its owner's address",
    }),
    role: z.enum(["admin", "agent", "read"]).meta({ description: "what this credential may do" }),
    apiKey: apiKeyView
      .nullable()
      .meta({ description: "the API key this request was made with; null for the login access token" }),
  })
  .meta({
    id: "Me",
    example: {
      userId: "usr_9fK2mQ7xL4pW1nR8",
      role: "agent",
      apiKey: {
        id: "key_b7qVFd9pTcWqyVY5sgCCOk",
        name: "research agent",
        role: "agent",
        walletIds: ["wal_4bG7hQ2nR8sT1vX3yZ5aC9"],
        expiresAt: null,
        createdAt: "2026-01-01T00:00:00.000Z",
        lastUsed: "2026-01-01T00:00:00.000Z",
      },
    },
  });

/**
 * GET /v1/me: what the credential of this request is: its account, its role and, for an API key, the key's
 * record (never its value). Any working credential may ask, so a client can offer only what its key allows.
 */
export function registerGetMe(app: App, services: Services): void {
  app.route({
    method: "GET",
    url: "/v1/me",
    config: { auth: "account", role: "read" },
    schema: {
      operationId: "getMe",
      tags: ["auth"],
      summary: "Who this credential is: its account, its role and its key's record",
      response: {
        200: jsonResponse("The credential's account and role", meView),
        ...errorResponses(),
      },
    },
    handler: async (request) => {
      const principal = principalOf(request);
      const db = services.store.db;
      const account = await getAccount(db, principal.accountId);
      const key =
        principal.credential.kind === "api_key"
          ? toApiKeyView(await getApiKey(db, principal.accountId, principal.credential.keyId))
          : null;
      return {
        userId: account.id,
        ...(principal.role === "admin" ? { email: account.email } : {}),
        role: principal.role,
        apiKey: key,
      };
    },
  });
}
