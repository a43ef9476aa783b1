import {
  type Address,
  appendTransactionMessageInstructions,
  assertIsTransactionWithBlockhashLifetime,
  type Base58EncodedBytes,
  createSolanaRpc,
  createSolanaRpcSubscriptions,
  createTransactionMessage,
  devnet as devnetCluster,
  generateKeyPairSigner,
  getBase58Decoder,
  getBase64EncodedWireTransaction,
  getBase64Encoder,
  getSignatureFromTransaction,
  type Instruction,
  isSolanaError,
  type KeyPairSigner,
  lamports,
  partiallySignTransaction,
  partiallySignTransactionMessageWithSigners,
  pipe,
  SOLANA_ERROR__INSTRUCTION_ERROR__CUSTOM,
  SOLANA_ERROR__JSON_RPC__INVALID_PARAMS,
  SOLANA_ERROR__JSON_RPC__METHOD_NOT_FOUND,
  SOLANA_ERROR__JSON_RPC__SERVER_ERROR_SEND_TRANSACTION_PREFLIGHT_FAILURE,
  SOLANA_ERROR__JSON_RPC__SERVER_ERROR_TRANSACTION_SIGNATURE_VERIFICATION_FAILURE,
  SOLANA_ERROR__TRANSACTION_ERROR__ACCOUNT_NOT_FOUND,
  SOLANA_ERROR__TRANSACTION_ERROR__ALREADY_PROCESSED,
  SOLANA_ERROR__TRANSACTION_ERROR__BLOCKHASH_NOT_FOUND,
  SOLANA_ERROR__TRANSACTION_ERROR__INSUFFICIENT_FUNDS_FOR_RENT,
  type SolanaError,
  sendAndConfirmTransactionFactory,
  setTransactionMessageFeePayer,
  setTransactionMessageFeePayerSigner,
  setTransactionMessageLifetimeUsingBlockhash,
  signTransactionMessageWithSigners,
} from "@solana/kit";
import { getTransferSolInstruction } from "@solana-program/system";
import {
  getCreateAssociatedTokenIdempotentInstruction,
  getTransferCheckedInstruction,
  TOKEN_PROGRAM_ADDRESS,
} from "@solana-program/token";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Devnet, fundSolana, startDevnet, waitForConfirmation } from "../src/index.ts";
import {
  corruptFirstSignature,
  type Rpc,
  rawRpc,
  rejectionOf,
  send,
  signedBase64,
  treasurySigner,
  usdcAta,
} from "./solana-helpers.ts";

let devnet: Devnet;
let rpc: Rpc;
let treasury: KeyPairSigner;

beforeAll(async () => {
  devnet = await startDevnet();
  rpc = createSolanaRpc(devnet.solana.rpcUrl);
  treasury = await treasurySigner(devnet);
});

afterAll(async () => {
  await devnet?.stop();
});

/** A fresh wallet holding 1 SOL and `usdc` atomic USDC. */
async function fundedWallet(usdc = 0n): Promise<KeyPairSigner> {
  const wallet = await generateKeyPairSigner();
  await fundSolana(devnet, wallet.address, { sol: 1_000_000_000n, usdc });
  return wallet;
}

function transferChecked(
  owner: KeyPairSigner,
  source: Address,
  destination: Address,
  amount: bigint,
  decimals: number,
) {
  return getTransferCheckedInstruction({
    source,
    mint: devnet.solana.usdcMint,
    destination,
    authority: owner,
    amount,
    decimals,
  });
}

/** The SolanaError cause of a preflight failure (asserting the outer error is -32002). */
function preflightCause(err: unknown): SolanaError {
  expect(isSolanaError(err, SOLANA_ERROR__JSON_RPC__SERVER_ERROR_SEND_TRANSACTION_PREFLIGHT_FAILURE)).toBe(
    true,
  );
  return (err as SolanaError).cause as SolanaError;
}

describe("Solana transfers through createSolanaRpc", () => {
  it("moves SOL end to end and reports it in statuses, signatures and the transaction", async () => {
    const recipient = await generateKeyPairSigner();
    const before = (await rpc.getBalance(treasury.address, { commitment: "confirmed" }).send()).value;
    const signature = await send(
      rpc,
      await signedBase64(rpc, treasury, [
        getTransferSolInstruction({
          source: treasury,
          destination: recipient.address,
          amount: 1_500_000_000n,
        }),
      ]),
    );
    await waitForConfirmation(rpc, signature);

    expect((await rpc.getBalance(recipient.address, { commitment: "confirmed" }).send()).value).toBe(
      1_500_000_000n,
    );
    const after = (await rpc.getBalance(treasury.address, { commitment: "confirmed" }).send()).value;
    expect(before - after).toBe(1_500_000_000n + 5_000n);

    const [status] = (await rpc.getSignatureStatuses([signature]).send()).value;
    expect(status?.err).toBeNull();
    expect(status?.status).toEqual({ Ok: null });
    expect(["confirmed", "finalized"]).toContain(status?.confirmationStatus);

    const signatures = await rpc
      .getSignaturesForAddress(recipient.address, { commitment: "confirmed" })
      .send();
    expect(signatures.map((s) => s.signature)).toEqual([signature]);
    expect(signatures[0]?.err).toBeNull();

    const tx = await rpc
      .getTransaction(signature, {
        commitment: "confirmed",
        maxSupportedTransactionVersion: 0,
        encoding: "json",
      })
      .send();
    expect(tx?.transaction.signatures).toEqual([signature]);
    expect(tx?.version).toBe(0);
    expect(tx?.meta?.err).toBeNull();
    expect(tx?.meta?.fee).toBe(5_000n);
    const keys = tx?.transaction.message.accountKeys ?? [];
    const recipientIndex = keys.indexOf(recipient.address);
    expect(tx?.meta?.preBalances[recipientIndex]).toBe(0n);
    expect(tx?.meta?.postBalances[recipientIndex]).toBe(1_500_000_000n);
    expect(tx?.slot).toBe(status?.slot);
  });

  it("moves USDC with TransferChecked and reports token balances", async () => {
    const sender = await fundedWallet(10_000_000n);
    const recipient = await generateKeyPairSigner();
    const source = await usdcAta(devnet, sender.address);
    const destination = await usdcAta(devnet, recipient.address);
    const signature = await send(
      rpc,
      await signedBase64(rpc, sender, [
        getCreateAssociatedTokenIdempotentInstruction({
          payer: sender,
          ata: destination,
          owner: recipient.address,
          mint: devnet.solana.usdcMint,
        }),
        transferChecked(sender, source, destination, 2_250_000n, 6),
      ]),
    );
    await waitForConfirmation(rpc, signature);

    const balance = await rpc.getTokenAccountBalance(destination, { commitment: "confirmed" }).send();
    expect(balance.value).toEqual({ amount: "2250000", decimals: 6, uiAmount: 2.25, uiAmountString: "2.25" });
    expect((await rpc.getTokenAccountBalance(source).send()).value.amount).toBe("7750000");

    const owned = await rpc
      .getTokenAccountsByOwner(
        recipient.address,
        { mint: devnet.solana.usdcMint },
        { encoding: "jsonParsed" },
      )
      .send();
    expect(owned.value.map((a) => a.pubkey)).toEqual([destination]);
    expect(owned.value[0]?.account.data.parsed.info.tokenAmount.amount).toBe("2250000");

    const tx = await rpc
      .getTransaction(signature, {
        commitment: "confirmed",
        maxSupportedTransactionVersion: 0,
        encoding: "jsonParsed",
      })
      .send();
    const transfer = tx?.transaction.message.instructions.find(
      (ix) => "parsed" in ix && ix.parsed.type === "transferChecked",
    );
    expect(transfer && "parsed" in transfer ? transfer.parsed.info : undefined).toMatchObject({
      source,
      destination,
      mint: devnet.solana.usdcMint,
      authority: sender.address,
      tokenAmount: { amount: "2250000", decimals: 6n },
    });
    const post = tx?.meta?.postTokenBalances?.find((b) => b.owner === recipient.address);
    expect(post?.uiTokenAmount.amount).toBe("2250000");
    expect(post?.mint).toBe(devnet.solana.usdcMint);
    expect(tx?.meta?.preTokenBalances?.find((b) => b.owner === recipient.address)).toBeUndefined();

    const history = await rpc.getSignaturesForAddress(destination, { commitment: "confirmed" }).send();
    expect(history[0]?.signature).toBe(signature);
  });

  it("lands a legacy transaction and returns it without maxSupportedTransactionVersion", async () => {
    const recipient = await generateKeyPairSigner();
    const { value: lifetime } = await rpc.getLatestBlockhash({ commitment: "confirmed" }).send();
    const message = pipe(
      createTransactionMessage({ version: "legacy" }),
      (m) => setTransactionMessageFeePayerSigner(treasury, m),
      (m) => setTransactionMessageLifetimeUsingBlockhash(lifetime, m),
      (m) =>
        appendTransactionMessageInstructions(
          [
            getTransferSolInstruction({
              source: treasury,
              destination: recipient.address,
              amount: 1_000_000_000n,
            }),
          ],
          m,
        ),
    );
    const wire = getBase64EncodedWireTransaction(await signTransactionMessageWithSigners(message));
    const signature = await send(rpc, wire);
    await waitForConfirmation(rpc, signature);
    const tx = await rpc.getTransaction(signature, { commitment: "confirmed", encoding: "json" }).send();
    expect(tx?.transaction.signatures).toEqual([signature]);
    expect(tx && "version" in tx ? tx.version : undefined).toBeUndefined();
    expect(tx?.transaction.message.header).toEqual({
      numReadonlySignedAccounts: 0,
      numReadonlyUnsignedAccounts: 1,
      numRequiredSignatures: 1,
    });
  });

  it("accepts base58-encoded transactions", async () => {
    const recipient = await generateKeyPairSigner();
    const base64 = await signedBase64(rpc, treasury, [
      getTransferSolInstruction({ source: treasury, destination: recipient.address, amount: 1_000_000_000n }),
    ]);
    const base58 = getBase58Decoder().decode(getBase64Encoder().encode(base64));
    const signature = await rpc
      .sendTransaction(base58 as unknown as Parameters<Rpc["sendTransaction"]>[0], { encoding: "base58" })
      .send();
    await waitForConfirmation(rpc, signature);
    expect((await rpc.getBalance(recipient.address, { commitment: "confirmed" }).send()).value).toBe(
      1_000_000_000n,
    );
  });

  it("confirms through websocket subscriptions with kit's sendAndConfirmTransactionFactory", async () => {
    // URLs tagged as a test cluster's give kit's cluster-typed clients.
    const testRpc = createSolanaRpc(devnetCluster(devnet.solana.rpcUrl));
    const subscriptions = createSolanaRpcSubscriptions(devnetCluster(devnet.solana.wsUrl));
    const recipient = await generateKeyPairSigner();
    const { value: lifetime } = await rpc.getLatestBlockhash({ commitment: "confirmed" }).send();
    const message = pipe(
      createTransactionMessage({ version: 0 }),
      (m) => setTransactionMessageFeePayerSigner(treasury, m),
      (m) => setTransactionMessageLifetimeUsingBlockhash(lifetime, m),
      (m) =>
        appendTransactionMessageInstructions(
          [
            getTransferSolInstruction({
              source: treasury,
              destination: recipient.address,
              amount: 1_000_000_000n,
            }),
          ],
          m,
        ),
    );
    const signed = await signTransactionMessageWithSigners(message);
    assertIsTransactionWithBlockhashLifetime(signed);
    const abort = new AbortController();
    const notifications = await subscriptions
      .accountNotifications(recipient.address, { commitment: "confirmed", encoding: "base64" })
      .subscribe({ abortSignal: abort.signal });
    // Start listening before sending: notifications published before iteration begins are not replayed.
    const firstNotification = notifications[Symbol.asyncIterator]().next();
    await sendAndConfirmTransactionFactory({ rpc: testRpc, rpcSubscriptions: subscriptions })(signed, {
      commitment: "confirmed",
    });
    const [status] = (await rpc.getSignatureStatuses([getSignatureFromTransaction(signed)]).send()).value;
    expect(["confirmed", "finalized"]).toContain(status?.confirmationStatus);
    const notification = await firstNotification;
    expect(notification.done).toBe(false);
    expect(notification.value?.value?.lamports).toBe(1_000_000_000n);
    abort.abort();
  });

  it("pays requestAirdrop from a faucet with a real transaction", async () => {
    const wallet = await generateKeyPairSigner();
    // Tagging the URL as a test cluster's gives the client its requestAirdrop method.
    const testRpc = createSolanaRpc(devnetCluster(devnet.solana.rpcUrl));
    const signature = await testRpc.requestAirdrop(wallet.address, lamports(2_000_000_000n)).send();
    await waitForConfirmation(rpc, signature);
    expect((await rpc.getBalance(wallet.address, { commitment: "confirmed" }).send()).value).toBe(
      2_000_000_000n,
    );
  });
});

describe("x402-style Solana payment", () => {
  const MEMO_PROGRAM = "MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr" as Address;
  const COMPUTE_BUDGET = "ComputeBudget111111111111111111111111111111" as Address;

  function computeBudget(tag: 2 | 3, value: bigint): Instruction {
    const data = new Uint8Array(tag === 2 ? 5 : 9);
    data[0] = tag;
    const view = new DataView(data.buffer);
    if (tag === 2) view.setUint32(1, Number(value), true);
    else view.setBigUint64(1, value, true);
    return { programAddress: COMPUTE_BUDGET, accounts: [], data };
  }

  it("lands a payer-signed TransferChecked co-signed by a fee payer, with memo, priority fee and history", async () => {
    const payer = await fundedWallet(3_000_000n);
    const facilitator = await fundedWallet();
    const payTo = await fundedWallet(1n);
    const source = await usdcAta(devnet, payer.address);
    const destination = await usdcAta(devnet, payTo.address);
    const { value: lifetime } = await rpc.getLatestBlockhash({ commitment: "confirmed" }).send();
    const message = pipe(
      createTransactionMessage({ version: 0 }),
      (m) => setTransactionMessageFeePayer(facilitator.address, m),
      (m) => setTransactionMessageLifetimeUsingBlockhash(lifetime, m),
      (m) =>
        appendTransactionMessageInstructions(
          [
            computeBudget(2, 20_000n),
            computeBudget(3, 1_000n),
            transferChecked(payer, source, destination, 1_250_000n, 6),
            { programAddress: MEMO_PROGRAM, accounts: [], data: new TextEncoder().encode("x402 order 42") },
          ],
          m,
        ),
    );
    const partial = await partiallySignTransactionMessageWithSigners(message);
    // The payer's signature alone does not verify the whole transaction.
    const unsigned = getBase64EncodedWireTransaction(partial);
    const early = await rejectionOf(
      rpc.simulateTransaction(unsigned, { encoding: "base64", sigVerify: true }).send(),
    );
    expect(
      isSolanaError(early, SOLANA_ERROR__JSON_RPC__SERVER_ERROR_TRANSACTION_SIGNATURE_VERIFICATION_FAILURE),
    ).toBe(true);

    const full = await partiallySignTransaction([facilitator.keyPair], partial);
    const wire = getBase64EncodedWireTransaction(full);
    const sim = await rpc
      .simulateTransaction(wire, { encoding: "base64", sigVerify: true, commitment: "confirmed" })
      .send();
    expect(sim.value.err).toBeNull();

    const before = (await rpc.getBalance(facilitator.address, { commitment: "confirmed" }).send()).value;
    const signature = await rpc.sendTransaction(wire, { encoding: "base64" }).send();
    await waitForConfirmation(rpc, signature);
    const after = (await rpc.getBalance(facilitator.address, { commitment: "confirmed" }).send()).value;
    const tx = await rpc
      .getTransaction(signature, {
        commitment: "confirmed",
        maxSupportedTransactionVersion: 0,
        encoding: "json",
      })
      .send();
    // Two signatures at 5000 lamports, plus ceil(1000 µlamports × 20000 CU / 10^6) = 20.
    expect(tx?.meta?.fee).toBe(10_020n);
    expect(before - after).toBe(10_020n);
    expect(
      (await rpc.getTokenAccountBalance(destination, { commitment: "confirmed" }).send()).value.amount,
    ).toBe("1250001");
    // The payee's token account (not its wallet address) is in the transaction, as on a cluster.
    const [entry] = await rpc
      .getSignaturesForAddress(destination, { commitment: "confirmed", limit: 1 })
      .send();
    expect(entry).toMatchObject({ signature, memo: "[13] x402 order 42", err: null });
  });

  it("returns inner instructions from simulateTransaction when asked", async () => {
    const owner = await generateKeyPairSigner();
    const wire = await signedBase64(rpc, treasury, [
      getCreateAssociatedTokenIdempotentInstruction({
        payer: treasury,
        ata: await usdcAta(devnet, owner.address),
        owner: owner.address,
        mint: devnet.solana.usdcMint,
      }),
    ]);
    const sim = await rpc
      .simulateTransaction(wire, {
        encoding: "base64",
        replaceRecentBlockhash: true,
        innerInstructions: true,
      })
      .send();
    expect(sim.value.err).toBeNull();
    const inner = sim.value.innerInstructions?.[0];
    expect(inner?.index).toBe(0);
    expect(
      inner?.instructions.map((ix) =>
        "parsed" in ix && typeof ix.parsed === "object" ? ix.parsed.type : null,
      ),
    ).toEqual(["getAccountDataSize", "createAccount", "initializeImmutableOwner", "initializeAccount3"]);
  });
});

describe("Solana failures match a cluster's error classes", () => {
  it("rejects a bad signature with -32003 (signature verification failure)", async () => {
    const recipient = await generateKeyPairSigner();
    const good = await signedBase64(rpc, treasury, [
      getTransferSolInstruction({ source: treasury, destination: recipient.address, amount: 1_000_000_000n }),
    ]);
    const err = await rejectionOf(send(rpc, corruptFirstSignature(good)));
    expect(
      isSolanaError(err, SOLANA_ERROR__JSON_RPC__SERVER_ERROR_TRANSACTION_SIGNATURE_VERIFICATION_FAILURE),
    ).toBe(true);
    expect((await rpc.getBalance(recipient.address).send()).value).toBe(0n);
  });

  it("rejects an expired blockhash in preflight with BlockhashNotFound", async () => {
    const recipient = await generateKeyPairSigner();
    const { value: old } = await rpc.getLatestBlockhash({ commitment: "processed" }).send();
    devnet.advanceSolanaSlots(151);
    expect(
      (await rpc.isBlockhashValid(old.blockhash as never, { commitment: "processed" }).send()).value,
    ).toBe(false);
    expect(await rpc.getBlockHeight({ commitment: "processed" }).send()).toBeGreaterThan(
      old.lastValidBlockHeight,
    );
    const err = await rejectionOf(
      send(
        rpc,
        await signedBase64(
          rpc,
          treasury,
          [
            getTransferSolInstruction({
              source: treasury,
              destination: recipient.address,
              amount: 1_000_000_000n,
            }),
          ],
          old,
        ),
      ),
    );
    expect(isSolanaError(preflightCause(err), SOLANA_ERROR__TRANSACTION_ERROR__BLOCKHASH_NOT_FOUND)).toBe(
      true,
    );
    expect((err as SolanaError).message).toMatch(/Transaction simulation failed/);
  });

  it("rejects TransferChecked with wrong decimals with the token program's MintDecimalsMismatch (custom 18)", async () => {
    const sender = await fundedWallet(1_000_000n);
    const recipient = await fundedWallet(1n);
    const err = await rejectionOf(
      send(
        rpc,
        await signedBase64(rpc, sender, [
          transferChecked(
            sender,
            await usdcAta(devnet, sender.address),
            await usdcAta(devnet, recipient.address),
            1_000n,
            9,
          ),
        ]),
      ),
    );
    const cause = preflightCause(err);
    expect(isSolanaError(cause, SOLANA_ERROR__INSTRUCTION_ERROR__CUSTOM)).toBe(true);
    expect(cause.context).toMatchObject({ code: 18, index: 0 });
    const data = (
      err as SolanaError<typeof SOLANA_ERROR__JSON_RPC__SERVER_ERROR_SEND_TRANSACTION_PREFLIGHT_FAILURE>
    ).context;
    expect(
      data.logs?.some((line) => line.includes("TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA failed")),
    ).toBe(true);
  });

  it("rejects a USDC transfer above the balance with the token program's InsufficientFunds (custom 1)", async () => {
    const sender = await fundedWallet(1_000n);
    const recipient = await fundedWallet(1n);
    const err = await rejectionOf(
      send(
        rpc,
        await signedBase64(rpc, sender, [
          transferChecked(
            sender,
            await usdcAta(devnet, sender.address),
            await usdcAta(devnet, recipient.address),
            1_001n,
            6,
          ),
        ]),
      ),
    );
    const cause = preflightCause(err);
    expect(isSolanaError(cause, SOLANA_ERROR__INSTRUCTION_ERROR__CUSTOM)).toBe(true);
    expect(cause.context).toMatchObject({ code: 1, index: 0 });
  });

  it("rejects a transfer that leaves a new account below rent exemption with InsufficientFundsForRent", async () => {
    const recipient = await generateKeyPairSigner();
    const err = await rejectionOf(
      send(
        rpc,
        await signedBase64(rpc, treasury, [
          getTransferSolInstruction({ source: treasury, destination: recipient.address, amount: 1_000n }),
        ]),
      ),
    );
    const cause = preflightCause(err);
    expect(isSolanaError(cause, SOLANA_ERROR__TRANSACTION_ERROR__INSUFFICIENT_FUNDS_FOR_RENT)).toBe(true);
    expect(cause.context).toMatchObject({ accountIndex: 1 });
  });

  it("rejects a fee payer that never received SOL with AccountNotFound", async () => {
    const broke = await generateKeyPairSigner();
    const err = await rejectionOf(
      send(
        rpc,
        await signedBase64(rpc, broke, [
          getTransferSolInstruction({ source: broke, destination: treasury.address, amount: 1n }),
        ]),
      ),
    );
    expect(isSolanaError(preflightCause(err), SOLANA_ERROR__TRANSACTION_ERROR__ACCOUNT_NOT_FOUND)).toBe(true);
  });

  it("rejects a replay of a landed transaction with AlreadyProcessed", async () => {
    const recipient = await generateKeyPairSigner();
    const wire = await signedBase64(rpc, treasury, [
      getTransferSolInstruction({ source: treasury, destination: recipient.address, amount: 1_000_000_000n }),
    ]);
    await waitForConfirmation(rpc, await send(rpc, wire));
    const err = await rejectionOf(send(rpc, wire));
    expect(isSolanaError(preflightCause(err), SOLANA_ERROR__TRANSACTION_ERROR__ALREADY_PROCESSED)).toBe(true);
    expect((await rpc.getBalance(recipient.address, { commitment: "confirmed" }).send()).value).toBe(
      1_000_000_000n,
    );
  });

  it("lands a failing transaction sent with skipPreflight, with its error and the fee charged", async () => {
    const sender = await fundedWallet(1_000_000n);
    const recipient = await fundedWallet(1n);
    const before = (await rpc.getBalance(sender.address, { commitment: "confirmed" }).send()).value;
    const wire = await signedBase64(rpc, sender, [
      transferChecked(
        sender,
        await usdcAta(devnet, sender.address),
        await usdcAta(devnet, recipient.address),
        5n,
        2,
      ),
    ]);
    const signature = await rpc.sendTransaction(wire, { encoding: "base64", skipPreflight: true }).send();
    const err = await rejectionOf(waitForConfirmation(rpc, signature));
    expect(String(err)).toMatch(/InstructionError/);
    const [status] = (await rpc.getSignatureStatuses([signature]).send()).value;
    expect(status?.err).toEqual({ InstructionError: [0n, { Custom: 18n }] });
    const after = (await rpc.getBalance(sender.address, { commitment: "processed" }).send()).value;
    expect(before - after).toBe(5_000n);
    expect(
      (await rpc.getTokenAccountBalance(await usdcAta(devnet, sender.address)).send()).value.amount,
    ).toBe("1000000");
  });

  it("drops a bad-signature transaction sent with skipPreflight: it never gets a status", async () => {
    const recipient = await generateKeyPairSigner();
    const wire = corruptFirstSignature(
      await signedBase64(rpc, treasury, [
        getTransferSolInstruction({
          source: treasury,
          destination: recipient.address,
          amount: 1_000_000_000n,
        }),
      ]),
    );
    const signature = await rpc.sendTransaction(wire, { encoding: "base64", skipPreflight: true }).send();
    devnet.advanceSolanaSlots(2);
    expect((await rpc.getSignatureStatuses([signature]).send()).value).toEqual([null]);
    expect((await rpc.getBalance(recipient.address).send()).value).toBe(0n);
  });
});

describe("Solana simulation and JSON-RPC surface", () => {
  it("simulates without signatures when replacing the blockhash, and verifies them when asked", async () => {
    const recipient = await generateKeyPairSigner();
    const wire = await signedBase64(
      rpc,
      treasury,
      [
        getTransferSolInstruction({
          source: treasury,
          destination: recipient.address,
          amount: 3_000_000_000n,
        }),
      ],
      { blockhash: "11111111111111111111111111111111", lastValidBlockHeight: 0n },
    );
    const sim = await rpc
      .simulateTransaction(wire, {
        encoding: "base64",
        replaceRecentBlockhash: true,
        accounts: { addresses: [recipient.address], encoding: "base64" },
      })
      .send();
    expect(sim.value.err).toBeNull();
    expect(sim.value.logs).toContain("Program 11111111111111111111111111111111 success");
    expect(sim.value.unitsConsumed).toBeGreaterThan(0n);
    expect(sim.value.replacementBlockhash?.blockhash).toMatch(/^[1-9A-HJ-NP-Za-km-z]{32,44}$/);
    expect(sim.value.accounts?.[0]?.lamports).toBe(3_000_000_000n);
    expect((await rpc.getBalance(recipient.address, { commitment: "processed" }).send()).value).toBe(0n);

    const stale = await rpc.simulateTransaction(wire, { encoding: "base64" }).send();
    expect(stale.value.err).toBe("BlockhashNotFound");

    const err = await rejectionOf(
      rpc.simulateTransaction(corruptFirstSignature(wire), { encoding: "base64", sigVerify: true }).send(),
    );
    expect(
      isSolanaError(err, SOLANA_ERROR__JSON_RPC__SERVER_ERROR_TRANSACTION_SIGNATURE_VERIFICATION_FAILURE),
    ).toBe(true);
  });

  it("answers cluster facts: rent, fees, genesis, version, health, mint", async () => {
    expect(await rpc.getMinimumBalanceForRentExemption(165n).send()).toBe(2_039_280n);
    expect(await rpc.getMinimumBalanceForRentExemption(0n).send()).toBe(890_880n);
    expect(await rpc.getHealth().send()).toBe("ok");
    expect(await rpc.getGenesisHash().send()).toMatch(/^[1-9A-HJ-NP-Za-km-z]{32,44}$/);
    expect((await rpc.getVersion().send())["solana-core"]).toMatch(/^\d+\.\d+\.\d+$/);
    const processed = await rpc.getSlot({ commitment: "processed" }).send();
    const finalized = await rpc.getSlot({ commitment: "finalized" }).send();
    expect(processed).toBeGreaterThanOrEqual(finalized);

    const mint = await rpc.getAccountInfo(devnet.solana.usdcMint, { encoding: "jsonParsed" }).send();
    const data = mint.value?.data;
    expect(data && "parsed" in data ? data.parsed : undefined).toMatchObject({
      type: "mint",
      info: { decimals: 6, mintAuthority: devnet.treasury.solana.address, isInitialized: true },
    });
    const raw = await rpc.getAccountInfo(devnet.solana.usdcMint, { encoding: "base64" }).send();
    expect(raw.value?.owner).toBe("TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA");
    expect(raw.value?.space).toBe(82n);
    expect((await rpc.getAccountInfo((await generateKeyPairSigner()).address).send()).value).toBeNull();

    const treasuryUsdc = await rpc
      .getTokenAccountBalance(await usdcAta(devnet, devnet.treasury.solana.address))
      .send();
    expect(BigInt(treasuryUsdc.value.amount)).toBeGreaterThan(0n);
  });

  it("filters getProgramAccounts with dataSize and memcmp, and answers getBlockTime", async () => {
    const holder = await fundedWallet(42n);
    const accounts = await rpc
      .getProgramAccounts(TOKEN_PROGRAM_ADDRESS, {
        encoding: "base64",
        filters: [
          { dataSize: 165n },
          {
            memcmp: {
              offset: 32n,
              bytes: holder.address as unknown as Base58EncodedBytes,
              encoding: "base58",
            },
          },
        ],
      })
      .send();
    expect(accounts.map((a) => a.pubkey)).toEqual([await usdcAta(devnet, holder.address)]);

    const [latest] = await rpc
      .getSignaturesForAddress(holder.address, { commitment: "confirmed", limit: 1 })
      .send();
    expect(latest).toBeDefined();
    if (latest !== undefined) {
      expect(await rpc.getBlockTime(latest.slot).send()).toBe(latest.blockTime);
    }
    const missing = await rawRpc(devnet.solana.rpcUrl, {
      jsonrpc: "2.0",
      id: 1,
      method: "getBlockTime",
      params: [10_000_000_000],
    });
    expect(missing).toMatchObject({ error: { code: -32004 } });
  });

  it("prices a message with getFeeForMessage (5000 lamports per signature, null for an unknown blockhash)", async () => {
    const recipient = await generateKeyPairSigner();
    const wire = getBase64Encoder().encode(
      await signedBase64(rpc, treasury, [
        getTransferSolInstruction({ source: treasury, destination: recipient.address, amount: 1n }),
      ]),
    );
    const message = Buffer.from(wire.subarray(1 + 64)).toString("base64");
    expect((await rpc.getFeeForMessage(message as never).send()).value).toBe(5_000n);
    devnet.advanceSolanaSlots(151);
    expect((await rpc.getFeeForMessage(message as never).send()).value).toBeNull();
  });

  it("uses the cluster's JSON-RPC error codes", async () => {
    // A real cluster method this devnet does not serve.
    const unknown = await rejectionOf(rpc.getBlockProduction().send());
    expect(isSolanaError(unknown, SOLANA_ERROR__JSON_RPC__METHOD_NOT_FOUND)).toBe(true);
    const invalid = await rejectionOf(rpc.getBalance("not-an-address" as Address).send());
    expect(isSolanaError(invalid, SOLANA_ERROR__JSON_RPC__INVALID_PARAMS)).toBe(true);

    const url = devnet.solana.rpcUrl;
    expect(await rawRpc(url, "{not json")).toMatchObject({ error: { code: -32700 }, id: null });
    expect(await rawRpc(url, { jsonrpc: "2.0", id: 1, method: "nope", params: [] })).toMatchObject({
      error: { code: -32601, message: "Method not found" },
      id: 1,
    });
    expect(await rawRpc(url, { jsonrpc: "2.0", id: 2, method: "getBalance", params: [] })).toMatchObject({
      error: { code: -32602 },
      id: 2,
    });
    expect(
      await rawRpc(url, {
        jsonrpc: "2.0",
        id: 7,
        method: "getSignatureStatuses",
        params: [["not-a-signature"]],
      }),
    ).toMatchObject({ error: { code: -32602, message: "Invalid param: Invalid" }, id: 7 });
    expect(await rawRpc(url, { id: 3, method: "getHealth" })).toMatchObject({ error: { code: -32600 } });
    expect(
      await rawRpc(url, [
        { jsonrpc: "2.0", id: 4, method: "getHealth" },
        { jsonrpc: "2.0", id: 5, method: "getSlot", params: [{ commitment: "bogus" }] },
      ]),
    ).toMatchObject([
      { result: "ok", id: 4 },
      { error: { code: -32602 }, id: 5 },
    ]);
    const belowConfirmed = await rawRpc(url, {
      jsonrpc: "2.0",
      id: 6,
      method: "getSignaturesForAddress",
      params: [devnet.treasury.solana.address, { commitment: "processed" }],
    });
    expect(belowConfirmed).toMatchObject({
      error: { code: -32602, message: "Method does not support commitment below `confirmed`" },
    });
  });
});
