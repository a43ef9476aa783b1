import { and, asc, eq, inArray, isNotNull, sql } from "drizzle-orm";
import type { Logger } from "pino";
import { expireApprovals } from "../approvals/approvals.ts";
import type { AuthzdClient } from "../authzd/client.ts";
import { ChainUnavailableError, findChainError } from "../chains/errors.ts";
import type { ChainClient, SignedTransfer, TransferStatus } from "../chains/types.ts";
import { transactions, wallets } from "../internal/db/schema.ts";
import type { Db } from "../internal/db/store.ts";
import { confirmTransactions, type Settlement, type SpendFee } from "../transactions/transactions.ts";
import type { Keyring } from "../wallets/keyring.ts";
import { openSigningKey } from "../wallets/wallets.ts";
import { settleRecordedPayment } from "../x402/pay.ts";
import { failSpend, signedColumns } from "./admission.ts";
import { broadcastRecorded, claimRebroadcast, fillNonceGap } from "./broadcast.ts";
import { findToken } from "./transfer.ts";

/**
 * A pending spend not seen on chain after this long is broadcast again (harmless: same hash). Measured by the
 * service's clock from the broadcast the row records (written at the system's time, which that clock is
 * outside tests): a test moves the clock past the wait instead of sleeping through it.
 */
const REBROADCAST_AFTER_MS = 3_000;
/**
 * A chain's pass ends after this many rows in a row whose reads found the chain unavailable, even when its
 * cheapest read answers: a pass bounded in time, on a node that serves some calls and not others.
 */
const UNAVAILABLE_ROWS_PER_PASS = 3;
/** How long a node behind a load balancer may lag another, in time. */
const NODE_LAG_MS = 60_000;
/** A chain's pass reads at most this many pending spends, oldest first. */
const PENDING_ROWS_PER_PASS = 500;
/** Confirmations found in one pass are written together, in batches of at most this many… */
const CONFIRM_BATCH = 100;
/** …and written once the first has waited this long, when the row being read at that moment is done. */
const CONFIRM_BATCH_MS = 500;

export interface ConfirmerDeps {
  db: Db;
  keyring: Keyring;
  /** The chains whose pending spends it settles, each in a loop of its own. */
  chainNames: readonly string[];
  chainClient(name: string): ChainClient | undefined;
  log: Logger;
  /** Given back the decisions of held spends that expire unsent. */
  authzd?: AuthzdClient | undefined;
  /**
   * The clock approvals expire by, and the confirmer's own waits (a re-broadcast's, a lagging node's) are
   * measured by; default the system clock.
   */
  now?: () => Date;
}

/**
 * Moves pending spends to `confirmed` or `failed` (and ends held spends whose approval expired), and is the
 * crash recovery too: its first pass after start-up reconciles every pending row against the chain:
 * confirmed if it landed; broadcast (again) if it still can; failed if it never can. A Solana spend whose
 * blockhash expired before it landed is rebuilt and re-signed only then, and only once across instances
 * (compare-and-set on its hash).
 *
 * Each chain has its own loop, and the expiry of held spends another: a chain whose node is slow or down
 * (a pass over it can last tens of seconds) holds up no other chain's confirmations.
 */
export class Confirmer {
  #loops: Promise<void>[] = [];
  /** Wakes the loops that wait for their next pass. */
  readonly #waiting = new Set<() => void>();
  #stopped = false;
  /**
   * EVM spends found missing where their nonce is used, by id: when that was first seen, on which chain. Kept
   * in memory: a restart only makes them wait again.
   */
  readonly #missingSince = new Map<string, { chain: string; since: number }>();
  /**
   * Pending spends whose re-broadcasts met no clear answer, by id: how many in a row. A warning goes out at
   * the 1st, 2nd, 4th, 8th… so that a spend stuck for an hour says so a dozen times, not 1,200.
   */
  readonly #unclearResends = new Map<string, { chain: string; count: number }>();

  constructor(
    readonly deps: ConfirmerDeps,
    readonly intervalMs: number,
  ) {}

  start(): void {
    this.#loops = [
      this.#repeat(() => this.#expireHeld()),
      ...this.deps.chainNames.map((chain) => this.#repeat(() => this.#settleChain(chain))),
    ];
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    for (const wake of this.#waiting) wake();
    await Promise.all(this.#loops);
  }

  /** One pass of every loop: held spends past their approval deadline end; each chain's pending spends settle. */
  async runOnce(): Promise<void> {
    await this.#expireHeld();
    await Promise.all(this.deps.chainNames.map((chain) => this.#settleChain(chain)));
  }

  /** Runs `pass`, then again `intervalMs` after it ended, until stopped. */
  async #repeat(pass: () => Promise<void>): Promise<void> {
    while (!this.#stopped) {
      await pass().catch((error: unknown) => this.deps.log.warn({ err: error }, "confirmer pass failed"));
      if (this.#stopped) return;
      await new Promise<void>((resolve) => {
        const wake = () => {
          clearTimeout(timer);
          this.#waiting.delete(wake);
          resolve();
        };
        const timer = setTimeout(wake, this.intervalMs);
        this.#waiting.add(wake);
      });
    }
  }

  async #expireHeld(): Promise<void> {
    const expired = await expireApprovals(this.deps);
    if (expired > 0) this.deps.log.info({ expired }, "spends waiting for approval expired");
  }

  /** A chain's pass: its pending spends, oldest first, at most {@link PENDING_ROWS_PER_PASS}. */
  async #settleChain(chain: string): Promise<void> {
    const client = this.deps.chainClient(chain);
    if (!client) return;
    try {
      const rows = await this.deps.db
        .select()
        .from(transactions)
        .where(
          and(
            eq(transactions.chain, chain),
            eq(transactions.status, "pending"),
            inArray(transactions.type, ["send", "x402"]),
          ),
        )
        .orderBy(asc(transactions.createdAt))
        .limit(PENDING_ROWS_PER_PASS);
      await this.#settleRows(client, rows);
      // Spends settled meanwhile (here or by another instance) are no longer watched as missing.
      const pending = new Set(rows.map((row) => row.id));
      for (const watched of [this.#missingSince, this.#unclearResends]) {
        for (const [id, entry] of watched) {
          if (entry.chain === chain && !pending.has(id)) watched.delete(id);
        }
      }
      if (client.config.kind === "evm") await this.#fillNonceGaps(client);
    } catch (error) {
      this.deps.log.warn({ err: error, chain }, "confirmer pass over a chain stopped early; will retry");
    }
  }

  /**
   * A nonce that was handed out but will never be mined (its spend failed and the process stopped before
   * giving it back or filling it) stalls every later send from that address. When the chain has mined
   * everything below the lowest pending nonce and holds nothing else, that gap is filled with a recorded
   * zero-value transfer to the wallet itself.
   */
  async #fillNonceGaps(client: ChainClient): Promise<void> {
    if (!client.getMinedNonce || !client.getPendingNonce) return;
    const stalled = await this.deps.db
      .select({
        walletId: transactions.walletId,
        fromAddress: transactions.fromAddress,
        lowest: sql<number>`min(${transactions.nonce})`,
      })
      .from(transactions)
      .where(
        and(
          eq(transactions.chain, client.config.name),
          eq(transactions.status, "pending"),
          isNotNull(transactions.nonce),
        ),
      )
      .groupBy(transactions.walletId, transactions.fromAddress);
    for (const { walletId, fromAddress, lowest } of stalled) {
      const [mined, pending] = await Promise.all([
        client.getMinedNonce(fromAddress),
        client.getPendingNonce(fromAddress),
      ]);
      if (mined >= Number(lowest) || pending !== mined) continue;
      this.deps.log.warn(
        { walletId, chain: client.config.name, nonce: mined },
        "filling a nonce gap that stalls later sends",
      );
      await fillNonceGap(this.deps, client, {
        walletId,
        chain: client.config.name,
        fromAddress,
        nonce: mined,
      });
    }
  }

  /**
   * Settles a chain's pending rows one by one, transfers first (one receipt each; an x402 payment may need a
   * search of the chain), each kind oldest first. The ones found confirmed are written together (one
   * database transaction for many): once {@link CONFIRM_BATCH} are waiting, when the first has waited
   * {@link CONFIRM_BATCH_MS} by the time a row is done, and at the end of the pass. A write that fails is
   * logged; its spends are still pending, and the next pass finds them again.
   *
   * A row whose reads find the chain unavailable ends the pass when the node fails its cheapest read too
   * (it is down: the other rows would only wait alike), or when it is the {@link UNAVAILABLE_ROWS_PER_PASS}th
   * such row in a row; otherwise the next row goes on (this row's reads alone failed: a slow search, a method
   * the provider limits).
   */
  async #settleRows(client: ChainClient, rows: (typeof transactions.$inferSelect)[]): Promise<void> {
    const confirmed: Settlement[] = [];
    let firstAt = 0;
    const write = async () => {
      const batch = confirmed.splice(0);
      await confirmTransactions(this.deps.db, batch).catch((error: unknown) =>
        this.deps.log.warn(
          { err: error, transactionIds: batch.map((s) => s.transactionId) },
          "could not record confirmed spends; will retry",
        ),
      );
    };
    const landed = await this.#landed(client, rows);
    const ordered = [
      ...rows.filter((row) => row.type !== "x402"),
      ...rows.filter((row) => row.type === "x402"),
    ];
    let unavailableInARow = 0;
    try {
      for (const row of ordered) {
        if (this.#stopped) return;
        if (row.type !== "x402" && (!row.txHash || !row.rawTx)) continue;
        try {
          // An x402 payment was submitted by the resource's facilitator: only the chain tells how it ended.
          if (row.type === "x402") await settleRecordedPayment(this.deps.db, client.config, row);
          else {
            const settlement = await this.#settle(client, row, landed.get(row.id));
            if (settlement && confirmed.push(settlement) === 1) firstAt = Date.now();
          }
          unavailableInARow = 0;
        } catch (error) {
          this.deps.log.warn(
            { err: error, transactionId: row.id },
            "could not reconcile a pending spend; will retry",
          );
          // An x402 payment's reads leave as the API's error, the chain error its cause.
          if (findChainError(error) instanceof ChainUnavailableError) {
            unavailableInARow++;
            if (unavailableInARow >= UNAVAILABLE_ROWS_PER_PASS || !(await answers(client))) throw error;
          }
        }
        const due = confirmed.length >= CONFIRM_BATCH || Date.now() - firstAt >= CONFIRM_BATCH_MS;
        if (confirmed.length > 0 && due) await write();
      }
    } finally {
      await write();
    }
  }

  /**
   * What one request can tell of a pass's broadcast transfers (by id): those that have landed, where the
   * chain can tell them at once (ChainClient.getLandedStatuses). The rest are asked about one by one.
   */
  async #landed(
    client: ChainClient,
    rows: (typeof transactions.$inferSelect)[],
  ): Promise<Map<string, TransferStatus>> {
    const transfers = rows.filter((row) => row.type !== "x402" && row.txHash && row.rawTx);
    const landed = new Map<string, TransferStatus>();
    if (!client.getLandedStatuses || transfers.length < 2) return landed;
    try {
      const statuses = await client.getLandedStatuses(
        transfers.map((row) => ({ signed: signedOf(row), from: row.fromAddress })),
      );
      transfers.forEach((row, i) => {
        const status = statuses[i];
        if (status) landed.set(row.id, status);
      });
    } catch (error) {
      // The chain not answering ends the pass, as it would at its first row.
      if (error instanceof ChainUnavailableError) throw error;
      // Each is then asked about on its own, as the loop does for one that has not landed.
      this.deps.log.info(
        { err: error, chain: client.config.name },
        "could not read a pass's receipts at once",
      );
    }
    return landed;
  }

  /**
   * Acts on what the chain says of a pending spend (`known` when it has landed, or asked now); a
   * confirmation is returned, for the caller to write.
   */
  async #settle(
    client: ChainClient,
    row: typeof transactions.$inferSelect,
    known: TransferStatus | undefined,
  ): Promise<Settlement | undefined> {
    const { db } = this.deps;
    const status = known ?? (await client.getTransferStatus(signedOf(row), row.fromAddress));
    if (status.state !== "dropped") this.#missingSince.delete(row.id);
    switch (status.state) {
      case "confirmed":
        return {
          transactionId: row.id,
          confirmedAt: status.blockTime ?? new Date(),
          fee: nativeFee(client, status.fee),
        };
      case "failed":
        await failSpend(db, row.id, status.reason, nativeFee(client, status.fee));
        return;
      case "pending": {
        const last = row.broadcastAt?.getTime() ?? 0;
        if (this.#now() - last < REBROADCAST_AFTER_MS) return;
        // Sent again unchanged; a definite rejection (it can never land) fails it and frees its nonce.
        if (!(await claimRebroadcast(db, row))) return;
        // An unclear answer each time (a gateway's error of its own, none at all) keeps it pending for as long
        // as the chain does not tell; such answers in a row are warnings, so that a spend stuck so is seen.
        let unclear = false;
        await broadcastRecorded(this.deps, client, row, (error) => {
          unclear = true;
          const count = (this.#unclearResends.get(row.id)?.count ?? 0) + 1;
          this.#unclearResends.set(row.id, { chain: row.chain, count });
          if ((count & (count - 1)) === 0)
            this.deps.log.warn(
              { err: error, transactionId: row.id, chain: row.chain, unclearResends: count },
              "pending spend re-broadcast without a clear answer; still pending",
            );
        }).catch((error: unknown) => {
          this.deps.log.info(
            { err: error, transactionId: row.id },
            "pending spend rejected on re-broadcast; failed",
          );
        });
        if (!unclear) this.#unclearResends.delete(row.id);
        return;
      }
      case "dropped":
        if (client.config.kind === "solana") {
          await this.#rebuild(client, row);
          return;
        }
        // EVM answers carry no slot to tell a node behind by: a transfer missing where its nonce is used is
        // failed only once it has been missing for longer than such a node could lag (it may be the one that
        // used the nonce, mined a moment ago).
        if (!this.#missingLongEnough(client.config.name, row.id)) return;
        await failSpend(db, row.id, status.reason);
        return;
    }
  }

  /** Notes that an EVM spend was found missing now; whether it has been since {@link NODE_LAG_MS} at least. */
  #missingLongEnough(chain: string, transactionId: string): boolean {
    const now = this.#now();
    const since = this.#missingSince.get(transactionId)?.since ?? now;
    this.#missingSince.set(transactionId, { chain, since });
    if (now - since < NODE_LAG_MS) return false;
    this.#missingSince.delete(transactionId);
    return true;
  }

  /** The service's clock, in milliseconds. */
  #now(): number {
    return (this.deps.now?.() ?? new Date()).getTime();
  }

  /** Re-signs a Solana spend whose blockhash expired unlanded; only the instance that wins the swap sends it. */
  async #rebuild(client: ChainClient, row: typeof transactions.$inferSelect): Promise<void> {
    const { db, keyring } = this.deps;
    const [wallet] = await db.select().from(wallets).where(eq(wallets.id, row.walletId));
    if (!wallet) return;
    const token = findToken(client, row.token);
    const replanned = await client.planTransfer({
      from: row.fromAddress,
      to: row.toAddress,
      token,
      amount: row.amountAtomic,
    });
    // Signed again as it was first: a token account the first did not open (its rent uncounted by the policy)
    // is not opened now, though its owner has closed it since; the transfer then fails.
    const { recipientAccountRent: _, ...withoutOpening } = replanned;
    const opened = row.rawTx === null || (client.opensRecipientAccount?.(row.rawTx) ?? true);
    const plan = opened ? replanned : withoutOpening;
    const privateKey = await openSigningKey(db, keyring, wallet, "solana");
    let signed: Awaited<ReturnType<ChainClient["signTransfer"]>>;
    try {
      signed = await client.signTransfer(plan, privateKey);
    } finally {
      privateKey.fill(0);
    }
    const [rebuilt] = await db
      .update(transactions)
      .set(signedColumns({}, signed))
      .where(
        and(
          eq(transactions.id, row.id),
          eq(transactions.status, "pending"),
          eq(transactions.txHash, row.txHash ?? ""),
        ),
      )
      .returning();
    if (!rebuilt) return;
    this.deps.log.info({ transactionId: row.id }, "blockhash expired before landing; re-signed and re-sent");
    await broadcastRecorded(this.deps, client, rebuilt).catch((error: unknown) => {
      this.deps.log.info({ err: error, transactionId: row.id }, "re-signed spend rejected; failed");
    });
  }
}

/** What the chain layer needs to find a recorded transfer. */
function signedOf(
  row: typeof transactions.$inferSelect,
): Pick<SignedTransfer, "txHash" | "nonce" | "lastValidBlockHeight"> {
  return {
    txHash: row.txHash ?? "",
    ...(row.nonce !== null ? { nonce: row.nonce } : {}),
    ...(row.lastValidBlockHeight !== null ? { lastValidBlockHeight: row.lastValidBlockHeight } : {}),
  };
}

/** A fee the chain told, in atomic units of its native coin, as a spend's record states it. */
function nativeFee(client: ChainClient, atomic: bigint | undefined): SpendFee | undefined {
  return atomic === undefined ? undefined : { atomic, token: client.config.nativeToken };
}

/** Whether a chain's node answers its cheapest read now. */
function answers(client: ChainClient): Promise<boolean> {
  return client.getHead().then(
    () => true,
    () => false,
  );
}
