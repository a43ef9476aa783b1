import {
  appendTransactionMessageInstructions,
  createSolanaRpc,
  createTransactionMessage,
  generateKeyPairSigner,
  getBase64EncodedWireTransaction,
  isSolanaError,
  type KeyPairSigner,
  type Nonce,
  pipe,
  SOLANA_ERROR__JSON_RPC__SERVER_ERROR_SEND_TRANSACTION_PREFLIGHT_FAILURE,
  setTransactionMessageFeePayerSigner,
  setTransactionMessageLifetimeUsingDurableNonce,
  signTransactionMessageWithSigners,
} from "@solana/kit";
import {
  fetchNonce,
  getCreateAccountInstruction,
  getInitializeNonceAccountInstruction,
  getNonceSize,
  getTransferSolInstruction,
  SYSTEM_PROGRAM_ADDRESS,
} from "@solana-program/system";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Devnet, startDevnet } from "../src/index.ts";
import { type Rpc, rawRpc, rejectionOf, send, signedBase64, treasurySigner } from "./solana-helpers.ts";

// kit sends `confirmed` when no commitment is given, so the tests always name one.
// Slots advance only when the test says so: commitment levels and blockhash ages become deterministic.
let devnet: Devnet;
let rpc: Rpc;
let treasury: KeyPairSigner;

beforeAll(async () => {
  devnet = await startDevnet({ solanaSlotMs: 3_600_000 });
  rpc = createSolanaRpc(devnet.solana.rpcUrl);
  treasury = await treasurySigner(devnet);
  devnet.advanceSolanaSlots(40);
});

afterAll(async () => {
  await devnet?.stop();
});

async function transferToNewWallet(): Promise<{ signature: string; recipient: string }> {
  const recipient = await generateKeyPairSigner();
  const signature = await send(
    rpc,
    await signedBase64(rpc, treasury, [
      getTransferSolInstruction({ source: treasury, destination: recipient.address, amount: 1_000_000_000n }),
    ]),
  );
  return { signature, recipient: recipient.address };
}

describe("Solana commitment levels", () => {
  it("reports a transaction processed, then confirmed one slot later, then finalized 32 slots later", async () => {
    const { signature, recipient } = await transferToNewWallet();
    const status = async () => (await rpc.getSignatureStatuses([signature as never]).send()).value[0];
    const atConfirmed = () =>
      rpc
        .getTransaction(signature as never, {
          commitment: "confirmed",
          maxSupportedTransactionVersion: 0,
          encoding: "json",
        })
        .send();
    const atFinalized = () =>
      rpc
        .getTransaction(signature as never, {
          commitment: "finalized",
          maxSupportedTransactionVersion: 0,
          encoding: "json",
        })
        .send();

    expect(await status()).toMatchObject({ confirmationStatus: "processed", confirmations: 0n, err: null });
    expect(await atConfirmed()).toBeNull();
    expect(await rpc.getSignaturesForAddress(recipient as never, { commitment: "confirmed" }).send()).toEqual(
      [],
    );

    devnet.advanceSolanaSlots(1);
    expect(await status()).toMatchObject({ confirmationStatus: "confirmed", confirmations: 1n });
    expect((await atConfirmed())?.transaction.signatures).toEqual([signature]);
    expect(await atFinalized()).toBeNull();
    const confirmedHistory = await rpc
      .getSignaturesForAddress(recipient as never, { commitment: "confirmed" })
      .send();
    expect(confirmedHistory.map((s) => [s.signature, s.confirmationStatus])).toEqual([
      [signature, "confirmed"],
    ]);
    expect(await rpc.getSignaturesForAddress(recipient as never, { commitment: "finalized" }).send()).toEqual(
      [],
    );

    devnet.advanceSolanaSlots(31);
    expect(await status()).toMatchObject({ confirmationStatus: "finalized", confirmations: null });
    expect((await atFinalized())?.transaction.signatures).toEqual([signature]);
    expect(
      (await rpc.getSignaturesForAddress(recipient as never, { commitment: "finalized" }).send())[0]
        ?.confirmationStatus,
    ).toBe("finalized");
  });

  it("reports slots and blockhashes per commitment like a cluster", async () => {
    const processed = await rpc.getSlot({ commitment: "processed" }).send();
    expect(await rpc.getSlot({ commitment: "confirmed" }).send()).toBe(processed - 1n);
    expect(await rpc.getSlot({ commitment: "finalized" }).send()).toBe(processed - 32n);
    expect(await rpc.getBlockHeight({ commitment: "processed" }).send()).toBe(processed);

    const latest = await rpc.getLatestBlockhash({ commitment: "processed" }).send();
    expect(latest.context.slot).toBe(processed);
    expect(latest.value.lastValidBlockHeight).toBe(processed + 150n);
    const finalized = await rpc.getLatestBlockhash({ commitment: "finalized" }).send();
    expect(finalized.value.blockhash).not.toBe(latest.value.blockhash);
    expect(finalized.value.lastValidBlockHeight).toBe(processed - 32n + 150n);
  });

  it("answers a history read asking a minContextSlot it has not reached with -32016, as a node behind does", async () => {
    const confirmed = await rpc.getSlot({ commitment: "confirmed" }).send();
    const ask = (minContextSlot: bigint) =>
      rawRpc(devnet.solana.rpcUrl, {
        jsonrpc: "2.0",
        id: 1,
        method: "getSignaturesForAddress",
        params: [treasury.address, { commitment: "confirmed", minContextSlot: Number(minContextSlot) }],
      });
    expect((await ask(confirmed)).result).toBeInstanceOf(Array);
    expect((await ask(confirmed + 1n)).error).toMatchObject({
      code: -32016,
      data: { contextSlot: Number(confirmed) },
    });
  });

  it("keeps a blockhash usable through its lastValidBlockHeight and not one block later", async () => {
    const { value } = await rpc.getLatestBlockhash({ commitment: "processed" }).send();
    const valid = async () =>
      (await rpc.isBlockhashValid(value.blockhash as never, { commitment: "processed" }).send()).value;
    devnet.advanceSolanaSlots(150);
    expect(await rpc.getBlockHeight({ commitment: "processed" }).send()).toBe(value.lastValidBlockHeight);
    expect(await valid()).toBe(true);
    devnet.advanceSolanaSlots(1);
    expect(await valid()).toBe(false);
  });

  it("accepts a durable-nonce transaction long after its blockhash window, once", async () => {
    const nonceAccount = await generateKeyPairSigner();
    const space = BigInt(getNonceSize());
    const rent = await rpc.getMinimumBalanceForRentExemption(space).send();
    await send(
      rpc,
      await signedBase64(rpc, treasury, [
        getCreateAccountInstruction({
          payer: treasury,
          newAccount: nonceAccount,
          lamports: rent,
          space,
          programAddress: SYSTEM_PROGRAM_ADDRESS,
        }),
        getInitializeNonceAccountInstruction({
          nonceAccount: nonceAccount.address,
          nonceAuthority: treasury.address,
        }),
      ]),
    );
    devnet.advanceSolanaSlots(1);
    const nonce = await fetchNonce(rpc, nonceAccount.address, { commitment: "confirmed" });
    const recipient = await generateKeyPairSigner();
    const message = pipe(
      createTransactionMessage({ version: 0 }),
      (m) => setTransactionMessageFeePayerSigner(treasury, m),
      (m) =>
        setTransactionMessageLifetimeUsingDurableNonce(
          {
            nonce: nonce.data.blockhash as unknown as Nonce,
            nonceAccountAddress: nonceAccount.address,
            nonceAuthorityAddress: treasury.address,
          },
          m,
        ),
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
    devnet.advanceSolanaSlots(200);
    const signature = await send(rpc, wire);
    devnet.advanceSolanaSlots(1);
    expect((await rpc.getSignatureStatuses([signature]).send()).value[0]?.err).toBeNull();
    expect((await rpc.getBalance(recipient.address, { commitment: "confirmed" }).send()).value).toBe(
      1_000_000_000n,
    );
    // The nonce advanced: the same transaction cannot land again.
    const err = await rejectionOf(rpc.sendTransaction(wire, { encoding: "base64" }).send());
    expect(isSolanaError(err, SOLANA_ERROR__JSON_RPC__SERVER_ERROR_SEND_TRANSACTION_PREFLIGHT_FAILURE)).toBe(
      true,
    );
  });

  it("asks for maxSupportedTransactionVersion before returning a v0 transaction (-32015)", async () => {
    const { signature } = await transferToNewWallet();
    devnet.advanceSolanaSlots(1);
    const reply = await rawRpc(devnet.solana.rpcUrl, {
      jsonrpc: "2.0",
      id: 1,
      method: "getTransaction",
      params: [signature, { commitment: "confirmed" }],
    });
    expect(reply).toMatchObject({ error: { code: -32015 } });
  });
});
