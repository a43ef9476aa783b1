import { z } from "zod";
import { createApiKey, toApiKeyView } from "../../../api-keys/api-keys.ts";
import { apiKeyView, displayName, errorResponses, idParam, jsonResponse } from "../../schemas.ts";
import { type App, principalOf, type Services } from "../../types.ts";

const newApiKey = apiKeyView
  .extend({ key: z.string().meta({ description: "the full key: shown here once, never again" }) })
  .meta({
    id: "NewApiKey",
    description: "A key just created, with its value",
    example: {
      id: "key_b7qVFd9pTcWqyVY5sgCCOk",
      name: "deploy bot",
      role: "agent",
      walletIds: null,
      expiresAt: null,
      createdAt: "2026-01-01T00:00:00.000Z",
      lastUsed: null,
      key: "svc_3xGk1hP9QzR7vLm2TnW8yB4cD6fJ0sUa",
    },
  });

const body = z
  .strictObject({
    name: displayName,
    role: z.enum(["admin", "agent", "read"]).default("agent"),
    walletIds: z.array(idParam("wal")).min(1).max(100).optional(),
    expiresAt: z.iso
      .datetime({ offset: true })
      .optional()
      .meta({ format: "date-time", example: "2027-01-01T00:00:00.000Z" }),
  })
  .superRefine((value, ctx) => {
    // Admin keys act for the whole account; a key bound to wallets is an agent's or a reader's.
    if (value.role === "admin" && value.walletIds)
      ctx.addIssue({ code: "custom", path: ["walletIds"], message: "admin keys cannot be bound to wallets" });
    if (value.expiresAt && Date.parse(value.expiresAt) <= Date.now())
      ctx.addIssue({ code: "custom", path: ["expiresAt"], message: "must be in the future" });
  })
  .meta({ example: { name: "deploy bot", role: "agent", walletIds: ["wal_4bG7hQ2nR8sT1vX3yZ5aC9"] } });

/** POST /v1/api-keys: create an API key; the only response that ever shows the full key. */
export function registerCreateApiKey(app: App, services: Services): void {
  app.route({
    method: "POST",
    url: "/v1/api-keys",
    config: { auth: "account", role: "admin" },
    schema: {
      operationId: "createApiKey",
      tags: ["api-keys"],
      summary: "Create an API key (the full key is returned once, here); admin credentials only",
      description:
        "`role` is `agent` unless given. `walletIds` limits the key to those wallets (others answer 404); omitted, the key sees every wallet of the account, present and future. After `expiresAt` the key answers 401 `key_expired`.",
      body,
      response: {
        201: jsonResponse("Created; the only response that shows the key", newApiKey),
        ...errorResponses(
          403,
          [404, "NotFound: a wallet in `walletIds` is not the account's"],
          [
            409,
            "ValidationError `too_many_api_keys`: the account holds `SVC_MAX_API_KEYS_PER_ACCOUNT` keys that are not revoked (default 100), expired ones included",
          ],
        ),
      },
    },
    handler: async (request, reply) => {
      const { name, role, walletIds, expiresAt } = request.body;
      const created = await createApiKey(
        { db: services.store.db, maxKeys: services.config.accountLimits.apiKeys },
        principalOf(request).accountId,
        {
          name,
          role,
          walletIds,
          expiresAt: expiresAt === undefined ? undefined : new Date(expiresAt),
        },
      );
      return reply.status(201).send({ ...toApiKeyView(created), key: created.key });
    },
  });
}
