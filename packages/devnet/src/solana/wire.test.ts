import { describe, expect, it } from "vitest";
import { isSigner, isWritable, MalformedTransactionError, parseWireTransaction } from "./wire.ts";

/** A legacy transaction: 1 signature, header [1, 0, 1], 3 keys, a blockhash, one instruction. */
function legacyTransaction(): Uint8Array {
  const bytes: number[] = [1, ...new Array<number>(64).fill(7), 1, 0, 1, 3];
  for (let key = 1; key <= 3; key++) bytes.push(...new Array<number>(32).fill(key));
  bytes.push(...new Array<number>(32).fill(9));
  bytes.push(1, 2, 2, 0, 1, 3, 0xaa, 0xbb, 0xcc);
  return Uint8Array.from(bytes);
}

describe("parseWireTransaction", () => {
  it("parses a legacy transaction's header, keys and instructions", () => {
    const tx = parseWireTransaction(legacyTransaction());
    expect(tx.version).toBe("legacy");
    expect(tx.header).toEqual({
      numRequiredSignatures: 1,
      numReadonlySignedAccounts: 0,
      numReadonlyUnsignedAccounts: 1,
    });
    expect(tx.accountKeys).toHaveLength(3);
    expect(tx.instructions).toEqual([
      { programIdIndex: 2, accounts: [0, 1], data: Uint8Array.from([0xaa, 0xbb, 0xcc]) },
    ]);
    expect([0, 1, 2].map((i) => isWritable(tx, i))).toEqual([true, true, false]);
    expect([0, 1, 2].map((i) => isSigner(tx, i))).toEqual([true, false, false]);
    expect(tx.messageBytes[0]).toBe(1);
  });

  it("rejects truncated bytes, trailing bytes and a signature count that disagrees with the header", () => {
    const good = legacyTransaction();
    expect(() => parseWireTransaction(good.subarray(0, good.length - 1))).toThrow(MalformedTransactionError);
    expect(() => parseWireTransaction(Uint8Array.from([...good, 0]))).toThrow(MalformedTransactionError);
    const wrongCount = Uint8Array.from(good);
    wrongCount[65] = 2;
    expect(() => parseWireTransaction(wrongCount)).toThrow(MalformedTransactionError);
  });
});
