import { and, eq, inArray, isNotNull, sql } from "drizzle-orm";
import type { Logger } from "pino";
import { ChainTimeoutError } from "../chains/errors.ts";
import type { ChainRegistry } from "../chains/registry.ts";
import type { ChainClient, IncomingTransfer } from "../chains/types.ts";
import { chainCursors, wallets } from "../internal/db/schema.ts";
import type { Db } from "../internal/db/store.ts";
import { recordTransferOnce, type TransactionRow } from "../transactions/transactions.ts";

const INITIALIZE_TIMEOUT_MS = 10_000;

/** A wallet address watched on one chain. */
interface Watched {
  walletId: string;
  address: string;
}

/**
 * Records native and token transfers into wallet addresses as `receive` transactions, each exactly once.
 *
 * - **Once per transfer.** A row's key is (chain, txHash, transfer index, wallet), unique in the store;
 *   rows are inserted with ON CONFLICT DO NOTHING and counted only when inserted
 *   ({@link recordTransferOnce}). The faucet records its payments through the same function.
 * - **None missed, across restarts.** A cursor per chain and network is persisted, and moved only after
 *   every transfer of the range it covers is committed; a crash in between rescans that range, and the
 *   unique key absorbs the repeats.
 * - **Several instances on one store.** Each may scan the same range; the unique key keeps one row, and
 *   the cursor moves by compare-and-set from the value the scan started at, so no range is skipped. It
 *   goes back only when the chain itself does (a reorganisation, a local chain restarted); a node lagging
 *   behind another leaves it where it is.
 * - **Only transfers into a wallet.** A wallet's own sends are recorded by the send path; a transfer from
 *   wallet A to wallet B is a `receive` for B only (A's address is the sender, never the recipient).
 *
 * @example
 * const watcher = new IncomingWatcher({ db, chains, log }, 2000);
 * await watcher.initialize();
 * watcher.start();
 */
export class IncomingWatcher {
  readonly #deps: { db: Db; chains: ChainRegistry; log: Logger };
  readonly #intervalMs: number;
  #stopped = false;
  #loops: Promise<void>[] = [];
  #wake: (() => void)[] = [];

  constructor(deps: { db: Db; chains: ChainRegistry; log: Logger }, intervalMs: number) {
    this.#deps = deps;
    this.#intervalMs = intervalMs;
  }

  /**
   * Sets a starting cursor ("from now") for each chain that has none, before the service takes requests,
   * so a wallet created and funded right after start-up is in range. An unreachable chain is logged and
   * gets its cursor on its first successful pass.
   */
  async initialize(): Promise<void> {
    await Promise.all(
      this.#deps.chains.names().map(async (name) => {
        let timer: NodeJS.Timeout | undefined;
        // A chain that does not answer in time must not hold up start-up; its loop keeps trying.
        const late = new Promise<never>((_, reject) => {
          timer = setTimeout(
            () =>
              reject(
                new ChainTimeoutError({
                  chain: name,
                  method: "scanIncoming",
                  timeoutMs: INITIALIZE_TIMEOUT_MS,
                }),
              ),
            INITIALIZE_TIMEOUT_MS,
          );
        });
        try {
          await Promise.race([this.pollOnce(name), late]);
        } catch (error) {
          this.#deps.log.warn({ err: error, chain: name }, "incoming-transfer watcher could not reach chain");
        } finally {
          clearTimeout(timer);
        }
      }),
    );
  }

  /** Polls every chain every interval (at once again while a chain is behind) until {@link stop}. */
  start(): void {
    this.#loops = this.#deps.chains.names().map((name) => this.#loop(name));
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    for (const wake of this.#wake.splice(0)) wake();
    await Promise.all(this.#loops);
  }

  /**
   * One scan of one chain from its cursor: records what it finds, then moves the cursor. Returns true when
   * the scan stopped short of the chain's head (call again at once).
   */
  async pollOnce(chainName: string): Promise<boolean> {
    const client = this.#deps.chains.client(chainName);
    if (!client) return false;
    const { db } = this.#deps;
    const network = client.config.network;
    const [row] = await db
      .select({ cursor: chainCursors.cursor })
      .from(chainCursors)
      .where(and(eq(chainCursors.chain, chainName), eq(chainCursors.network, network)));
    const cursor = row?.cursor ?? null;
    const watched = new Map<string, Watched>();
    const result = await client.scanIncoming(async () => {
      for (const w of await watchedAddresses(db, client)) watched.set(normalise(client, w.address), w);
      return [...watched.values()].map((w) => w.address);
    }, cursor);
    const recorded = await this.#record(client, result.transfers, watched);
    if (result.cursor === cursor) return result.more === true;
    if (cursor === null) {
      await db
        .insert(chainCursors)
        .values({ chain: chainName, network, cursor: result.cursor })
        .onConflictDoNothing();
    } else {
      await db
        .update(chainCursors)
        .set({ cursor: result.cursor, updatedAt: new Date() })
        .where(
          and(
            eq(chainCursors.chain, chainName),
            eq(chainCursors.network, network),
            eq(chainCursors.cursor, cursor),
          ),
        );
    }
    if (recorded.length > 0) {
      this.#deps.log.info({ chain: chainName, recorded: recorded.length }, "recorded incoming transfers");
    }
    return result.more === true;
  }

  async #record(
    client: ChainClient,
    transfers: readonly IncomingTransfer[],
    watched: Map<string, Watched>,
  ): Promise<TransactionRow[]> {
    const recorded: TransactionRow[] = [];
    // A fixed order, so two instances recording the same batch take the same locks in the same order.
    const ordered = [...transfers].sort((a, b) =>
      a.txHash === b.txHash ? a.index - b.index : a.txHash < b.txHash ? -1 : 1,
    );
    for (const transfer of ordered) {
      const row = await recordIncoming(
        this.#deps.db,
        client,
        transfer,
        watched.get(normalise(client, transfer.to)),
      );
      if (row) recorded.push(row);
    }
    return recorded;
  }

  async #loop(chainName: string): Promise<void> {
    while (!this.#stopped) {
      let more = false;
      try {
        more = await this.pollOnce(chainName);
      } catch (error) {
        if (this.#stopped) return;
        this.#deps.log.warn({ err: error, chain: chainName }, "incoming-transfer scan failed; will retry");
      }
      if (!more) await this.#sleep();
    }
  }

  #sleep(): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, this.#intervalMs);
      const wake = this.#wake;
      function done() {
        clearTimeout(timer);
        const at = wake.indexOf(done);
        if (at !== -1) wake.splice(at, 1);
        resolve();
      }
      wake.push(done);
    });
  }
}

/**
 * Records one incoming transfer as a `receive` of the wallet that owns its recipient address, unless it is
 * already recorded. Returns the row inserted, if one was. A wallet paying itself has both sides recorded,
 * its send and this receive: what left it came back, so its history sums to its balance.
 */
export async function recordIncoming(
  db: Db,
  client: ChainClient,
  transfer: IncomingTransfer,
  wallet: Watched | undefined,
): Promise<TransactionRow | undefined> {
  if (!wallet) return undefined;
  return recordTransferOnce(db, {
    walletId: wallet.walletId,
    type: "receive",
    chain: client.config.name,
    token: transfer.token.symbol,
    amountAtomic: transfer.amount,
    decimals: transfer.token.decimals,
    fromAddress: transfer.from,
    toAddress: wallet.address,
    txHash: transfer.txHash,
    transferIndex: transfer.index,
    status: "confirmed",
    confirmedAt: transfer.blockTime,
  });
}

/** The addresses, on this chain, of every wallet that holds it (archived wallets still receive). */
async function watchedAddresses(db: Db, client: ChainClient): Promise<Watched[]> {
  const column = client.config.kind === "evm" ? wallets.evmAddress : wallets.solanaAddress;
  const rows = await db
    .select({ walletId: wallets.id, address: column })
    .from(wallets)
    .where(and(isNotNull(column), sql`${wallets.chains} @> ${JSON.stringify([client.config.name])}::jsonb`));
  return rows.flatMap((r) => (r.address ? [{ walletId: r.walletId, address: r.address }] : []));
}

/** EVM addresses compare without case (checksums differ in case only); Solana's are case-sensitive. */
function normalise(client: ChainClient, address: string): string {
  return client.config.kind === "evm" ? address.toLowerCase() : address;
}

/** Forgets the scan cursors of `chains`: chains started anew are scanned from their head, as new ones are. */
export async function forgetCursors(db: Db, chains: readonly string[]): Promise<void> {
  await db.delete(chainCursors).where(inArray(chainCursors.chain, [...chains]));
}
