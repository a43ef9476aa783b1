import type { ApiKeyRecord } from "../api-keys/api-keys.ts";

/** The API key record on the wire (spec 2.6 with api.md's role fields); never the key itself. */
export function toApiKeyView(record: ApiKeyRecord) {
  return {
    id: record.id,
    name: record.name,
    role: record.role,
    walletIds: record.walletIds,
    expiresAt: record.expiresAt?.toISOString() ?? null,
    createdAt: record.createdAt.toISOString(),
    lastUsed: record.lastUsedAt?.toISOString() ?? null,
  };
}
