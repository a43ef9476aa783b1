import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { createKeyPairSignerFromPrivateKeyBytes } from "@solana/kit";
import { and, asc, eq, gt, inArray, sql } from "drizzle-orm";
import type { Logger } from "pino";
import {
  ChainError,
  ChainUnavailableError,
  chainCall,
  NonceTakenError,
  TransactionNotFoundError,
} from "../chains/errors.ts";
import { evmAddressOf } from "../chains/evm-keys.ts";
import type { ChainRegistry } from "../chains/registry.ts";
import type { ChainClient, IncomingTransfer, SignedTransfer, TokenInfo } from "../chains/types.ts";
import { faucetGrants, wallets } from "../internal/db/schema.ts";
import { type Db, withDomainErrors } from "../internal/db/store.ts";
import { errors } from "../internal/errors.ts";
import { formatUnits, parseUnitsStrict } from "../internal/money.ts";
import { recordIncoming } from "../receives/watcher.ts";
import { broadcastTransfer, checkRentExemption, findToken, parseTransferAmount } from "../spends/transfer.ts";
import { findTransfer, type TransactionRow } from "../transactions/transactions.ts";
import { findWalletForAccount } from "../wallets/wallets.ts";

/** An account the faucet pays from. */
export interface FaucetAccount {
  /** 32-byte secret: secp256k1 (EVM) or ed25519 seed (Solana). */
  privateKey: Uint8Array;
  /** Funds the account before its first payment (the embedded devnet tops up a fresh account). */
  prepare?: () => Promise<void>;
}

/** The faucet's paying account per chain kind, where there is one. */
export interface FaucetAccounts {
  evm?: FaucetAccount;
  solana?: FaucetAccount;
}

/** Caps per rolling 24 h and chain, in whole tokens (decimal strings). */
export interface FaucetCaps {
  /** Per wallet. */
  usdc: string;
  native: string;
  /** Per account, over all its wallets: without it, an account could multiply the cap by making wallets. */
  accountUsdc: string;
  accountNative: string;
}

export interface FaucetRequest {
  chain: string;
  token: string;
  /** Decimal string in whole tokens; default {@link DEFAULT_AMOUNTS}. */
  amount?: string | undefined;
}

/** What one faucet call pays when no amount is given, in whole tokens. */
export const DEFAULT_AMOUNTS = { usdc: "100", native: "1" } as const;

const DAY_MS = 24 * 60 * 60 * 1000;
const CONFIRMATION_TIMEOUT_MS = 60_000;
const CONFIRMATION_POLL_MS = 50;
const DROPPED_POLL_MS = 500;
/**
 * Attempts when a payment's EVM nonce is taken by another sender of the same key (another instance), or its
 * transaction is one another grant has claimed.
 */
const NONCE_ATTEMPTS = 3;

/** The transaction just signed is already another grant's: that grant's instance signed the same one. */
class ClaimedByAnotherGrant extends Error {
  override name = "ClaimedByAnotherGrant";
}

/**
 * Test coins on local and test networks: pays a wallet from the faucet account on chain, within a cap per
 * wallet, chain and token over a rolling 24 h, and records the payment as the wallet's `receive` (the
 * same row the incoming-transfer watcher would record; the store's unique key keeps exactly one).
 *
 * The cap is enforced atomically (the wallet row is locked while the window is summed and the grant
 * inserted), so concurrent requests never pass it. Payments from one account on one chain are signed and
 * broadcast one at a time within the process (EVM nonces); confirmations are awaited concurrently.
 *
 * Each grant claims its payment's transaction in the store before it is broadcast, and no two grants can
 * claim one: instances sharing the store and the faucet key, asked for the same payment at once, sign the
 * same bytes (same nonce, fees and calldata; a Solana transfer with the same blockhash), which the chain
 * takes once; so does one instance paying the same again when its node, behind a load balancer, plans the
 * second payment a block behind (at the first one's nonce). The grant that claims it second pays with a
 * transaction of its own.
 *
 * @example
 * const row = await faucet.pay(accountId, walletId, { chain: "base", token: "USDC", amount: "25" });
 */
export class Faucet {
  readonly #deps: { db: Db; chains: ChainRegistry; accounts: FaucetAccounts; caps: FaucetCaps; log: Logger };
  readonly #queues = new Map<string, Promise<unknown>>();
  readonly #prepared = new Map<string, Promise<void>>();

  constructor(deps: {
    db: Db;
    chains: ChainRegistry;
    accounts: FaucetAccounts;
    caps: FaucetCaps;
    log: Logger;
  }) {
    this.#deps = deps;
  }

  async pay(accountId: string, walletId: string, request: FaucetRequest): Promise<TransactionRow> {
    const { db, chains } = this.#deps;
    const wallet = await findWalletForAccount(db, accountId, walletId);
    if (wallet.status !== "active") throw errors.walletArchived(wallet.id);
    const config = chains.get(request.chain);
    if (!config) throw errors.unknownChain(request.chain, chains.names());
    if (!config.testnet) throw errors.faucetUnavailable(request.chain, "it is not a local or test network");
    if (!wallet.chains.includes(request.chain)) throw errors.chainNotInWallet(request.chain, wallet.chains);
    const account = this.#deps.accounts[config.kind];
    const client = chains.client(request.chain);
    if (!account || !client) throw errors.faucetUnavailable(request.chain, "no faucet account is configured");
    const token = findToken(client, request.token);
    const isNative = token.address === null;
    const amount = parseTransferAmount(
      client,
      token,
      request.amount ?? (isNative ? DEFAULT_AMOUNTS.native : DEFAULT_AMOUNTS.usdc),
    );
    const to = config.kind === "evm" ? wallet.evmAddress : wallet.solanaAddress;
    if (!to) throw errors.chainNotInWallet(request.chain, wallet.chains);

    const caps = this.#deps.caps;
    const cap = parseUnitsStrict(isNative ? caps.native : caps.usdc, token.decimals) ?? 0n;
    const accountCap =
      parseUnitsStrict(isNative ? caps.accountNative : caps.accountUsdc, token.decimals) ?? 0n;
    const grantId = await this.#reserve(accountId, wallet.id, request.chain, token, amount, {
      wallet: cap,
      account: accountCap,
    });
    let signed: SignedTransfer;
    try {
      signed = await chainCall(request.chain, () => this.#send(client, account, grantId, to, token, amount));
    } catch (error) {
      await db.delete(faucetGrants).where(eq(faucetGrants.id, grantId));
      // The node refused the payment, or its nonce was still taken after every attempt: nothing was paid.
      if (error instanceof ChainError)
        throw errors.broadcastRejected(request.chain, error.shortMessage, error);
      throw error;
    }
    const deadline = Date.now() + CONFIRMATION_TIMEOUT_MS;
    await chainCall(request.chain, () => this.#confirmed(client, signed, account, grantId, deadline));
    const transfer = await chainCall(request.chain, () => paidTransfer(client, signed.txHash, to, deadline));
    const watched = { walletId: wallet.id, address: to };
    const row =
      (await recordIncoming(db, client, transfer, watched)) ??
      (await findTransfer(db, {
        chain: request.chain,
        txHash: transfer.txHash,
        transferIndex: transfer.index,
        walletId: wallet.id,
      }));
    if (!row) throw errors.internal(new Error(`faucet payment ${signed.txHash} was not recorded`));
    return row;
  }

  /** Admits the grant against the wallet's and the account's caps, atomically; returns its id. */
  async #reserve(
    accountId: string,
    walletId: string,
    chain: string,
    token: TokenInfo,
    amount: bigint,
    caps: { wallet: bigint; account: bigint },
  ): Promise<string> {
    const id = randomUUID();
    await this.#deps.db.transaction(async (tx) => {
      // The account's wallet rows are the lock (always taken in id order, so two grants cannot deadlock):
      // grants to one account's wallets are admitted one at a time, for both caps.
      const locked = await tx
        .select({ id: wallets.id, status: wallets.status })
        .from(wallets)
        .where(eq(wallets.accountId, accountId))
        .orderBy(asc(wallets.id))
        .for("update");
      // Checked again under the lock: an archive that raced the first check wins.
      if (locked.find((row) => row.id === walletId)?.status !== "active")
        throw errors.walletArchived(walletId);
      const since = new Date(Date.now() - DAY_MS);
      const windowOf = async (scope: "wallet" | "account") => {
        const [window] = await tx
          .select({
            used: sql<string>`coalesce(sum(${faucetGrants.amountAtomic}), 0)`,
            oldest: sql<Date | string | null>`min(${faucetGrants.createdAt})`,
          })
          .from(faucetGrants)
          .where(
            and(
              scope === "wallet"
                ? eq(faucetGrants.walletId, walletId)
                : inArray(
                    faucetGrants.walletId,
                    tx.select({ id: wallets.id }).from(wallets).where(eq(wallets.accountId, accountId)),
                  ),
              eq(faucetGrants.chain, chain),
              eq(faucetGrants.token, token.symbol),
              gt(faucetGrants.createdAt, since),
            ),
          );
        return { used: BigInt(window?.used ?? "0"), oldest: window?.oldest ? new Date(window.oldest) : null };
      };
      for (const scope of ["wallet", "account"] as const) {
        const cap = caps[scope];
        const { used, oldest } = await windowOf(scope);
        if (used + amount <= cap) continue;
        const fmt = (value: bigint) => formatUnits(value, token.decimals);
        const remaining = cap > used ? cap - used : 0n;
        throw errors.faucetCapExceeded(
          `Faucet cap of ${fmt(cap)} ${token.symbol} per ${scope} per 24h on ${chain} exceeded: ${fmt(used)} used, this request is ${fmt(amount)}`,
          {
            scope,
            chain,
            token: token.symbol,
            cap: fmt(cap),
            used: fmt(used),
            requested: fmt(amount),
            remaining: fmt(remaining),
            resetsAt: new Date((oldest ?? new Date()).getTime() + DAY_MS).toISOString(),
          },
        );
      }
      await tx
        .insert(faucetGrants)
        .values({ id, walletId, chain, token: token.symbol, amountAtomic: amount });
    });
    return id;
  }

  /**
   * Signs the payment, claims its transaction for the grant and broadcasts it, one at a time per chain
   * (nonces); retries a nonce taken elsewhere, and a transaction another grant claimed first.
   */
  #send(
    client: ChainClient,
    account: FaucetAccount,
    grantId: string,
    to: string,
    token: TokenInfo,
    amount: bigint,
  ): Promise<SignedTransfer> {
    const chain = client.config.name;
    return this.#serialised(chain, async () => {
      await this.#prepare(chain, account);
      const from = await faucetAddress(client, account);
      // EVM: the lowest nonce this payment may take, past one another grant's identical transaction holds.
      let nonceFrom = 0;
      for (let attempt = 1; ; attempt++) {
        // Planned (the network part) outside any database transaction, like every transfer; SOL too little
        // for a new account is refused here as a send refuses it, not by the chain.
        const input = { from, to, token, amount };
        const planned = await client.planTransferWithBalances(input);
        checkRentExemption(client, input, planned);
        const pending = planned.plan.evm?.pendingNonce;
        const signed = await client.signTransfer(
          planned.plan,
          account.privateKey,
          pending === undefined ? undefined : Math.max(pending, nonceFrom),
        );
        try {
          await this.#claim(grantId, chain, signed.txHash);
        } catch (error) {
          if (!(error instanceof ClaimedByAnotherGrant)) throw error;
          // Signed alike for another grant on every attempt (Solana: instances whose compute-unit limits met
          // each time): refused as a nonce still taken is, nothing paid.
          if (attempt >= NONCE_ATTEMPTS)
            throw errors.broadcastRejected(
              chain,
              "signed alike for another faucet request on every attempt",
              error,
            );
          this.#deps.log.info({ chain }, "faucet payment signed alike for another grant; re-signing");
          if (signed.nonce !== undefined) {
            // That grant's instance broadcasts the same bytes (the node takes them once): sent from here too,
            // its nonce is used before this payment is planned again, whatever became of that instance.
            await broadcastTransfer(client, signed).catch((failed: unknown) => {
              if (!(failed instanceof NonceTakenError)) throw failed;
            });
            nonceFrom = signed.nonce + 1;
          }
          // Solana: signed again, the transfer differs (its compute-unit limit, see SolanaChain).
          continue;
        }
        try {
          await broadcastTransfer(client, signed);
          return signed;
        } catch (error) {
          // No answer: the payment may be on its way, and the confirmation tells (its grant kept meanwhile).
          if (error instanceof ChainUnavailableError) return signed;
          if (!(error instanceof NonceTakenError) || attempt >= NONCE_ATTEMPTS) throw error;
          this.#deps.log.info({ chain }, "faucet nonce taken by another sender; re-signing");
        }
      }
    });
  }

  /** Records the transaction as the grant's payment; {@link ClaimedByAnotherGrant} when one already is. */
  async #claim(grantId: string, chain: string, txHash: string): Promise<void> {
    await withDomainErrors(
      () => this.#deps.db.update(faucetGrants).set({ txHash }).where(eq(faucetGrants.id, grantId)),
      {
        faucet_grants_tx_hash_key: () =>
          new ClaimedByAnotherGrant(`faucet payment ${txHash} on ${chain} is another grant's`),
      },
    );
  }

  /**
   * Waits until the payment is confirmed; a payment that failed, or a Solana payment whose blockhash expired
   * unlanded, releases its grant. An EVM payment missing where its nonce is used is not "dropped" to the
   * faucet: a node that serves receipts may lag the one that counts nonces, and the payment may be what used
   * it. It is waited for like a pending one; past the deadline, its grant stays counted.
   */
  async #confirmed(
    client: ChainClient,
    signed: SignedTransfer,
    account: FaucetAccount,
    grantId: string,
    deadline: number,
  ): Promise<void> {
    const from = await faucetAddress(client, account);
    for (;;) {
      const status = await client.getTransferStatus(signed, from);
      if (status.state === "confirmed") return;
      const ended =
        status.state === "failed" || (status.state === "dropped" && client.config.kind === "solana");
      if (ended) {
        await this.#deps.db.delete(faucetGrants).where(eq(faucetGrants.id, grantId));
        throw errors.broadcastRejected(
          client.config.name,
          `faucet payment ${status.state}: ${status.reason}`,
        );
      }
      // Still pending: the watcher records it when it lands; the grant stays counted meanwhile. Missing where
      // its nonce is used, it is looked for less often: a lagging node takes seconds to catch up.
      if (Date.now() > deadline) throw errors.chainUnavailable(client.config.name);
      await sleep(status.state === "dropped" ? DROPPED_POLL_MS : CONFIRMATION_POLL_MS);
    }
  }

  #prepare(chain: string, account: FaucetAccount): Promise<void> {
    let prepared = this.#prepared.get(chain);
    if (!prepared) {
      prepared = (account.prepare?.() ?? Promise.resolve()).catch((error: unknown) => {
        this.#prepared.delete(chain);
        throw error;
      });
      this.#prepared.set(chain, prepared);
    }
    return prepared;
  }

  #serialised<T>(key: string, task: () => Promise<T>): Promise<T> {
    const previous = this.#queues.get(key) ?? Promise.resolve();
    const next = previous.then(task, task);
    this.#queues.set(
      key,
      next.catch(() => undefined),
    );
    return next;
  }
}

/**
 * The transfer a confirmed faucet payment made to `to`, as the node shows it. A node behind the one that
 * confirmed it (a load balancer's other node) may not show it yet: asked again until `deadline`, then 502
 * `chain_unavailable` (the payment stands; the watcher records it when the node catches up).
 */
async function paidTransfer(
  client: ChainClient,
  txHash: string,
  to: string,
  deadline: number,
): Promise<IncomingTransfer> {
  for (;;) {
    const transfers = await client.getIncomingTransfers(txHash, [to]).catch((error: unknown) => {
      if (error instanceof TransactionNotFoundError) return [];
      throw error;
    });
    const transfer = transfers[0];
    if (transfer) return transfer;
    if (Date.now() > deadline) throw errors.chainUnavailable(client.config.name);
    await sleep(CONFIRMATION_POLL_MS);
  }
}

/** The faucet account's address on a chain, derived as the chain derives a signer's. */
async function faucetAddress(client: ChainClient, account: FaucetAccount): Promise<string> {
  if (client.config.kind === "evm") {
    return evmAddressOf(account.privateKey);
  }
  return (await createKeyPairSignerFromPrivateKeyBytes(account.privateKey)).address;
}
