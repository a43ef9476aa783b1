import { eq } from "drizzle-orm";
import type { ChainKind } from "../../src/chains/registry.ts";
import { wallets } from "../../src/internal/db/schema.ts";
import type { RunningService } from "../../src/service.ts";
import { openSigningKey } from "../../src/wallets/wallets.ts";

/** Opens a wallet's stored private key through the service's own store and keyring, as signing does. */
export async function openStoredKey(
  service: Pick<RunningService, "store" | "keyring">,
  walletId: string,
  kind: ChainKind,
): Promise<Buffer> {
  const [wallet] = await service.store.db.select().from(wallets).where(eq(wallets.id, walletId));
  if (!wallet) throw new Error(`no wallet ${walletId}`);
  return openSigningKey(service.store.db, service.keyring, wallet, kind);
}
