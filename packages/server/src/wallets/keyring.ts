import { createHmac, generateKeyPairSync, timingSafeEqual } from "node:crypto";
import { getBase58Decoder } from "@solana/kit";
import { eq } from "drizzle-orm";
import { evmAddressOf } from "../chains/evm-keys.ts";
import type { ChainKind } from "../chains/registry.ts";
import { newKey, open, seal } from "../internal/crypto.ts";
import { serviceKeys } from "../internal/db/schema.ts";
import type { Db } from "../internal/db/store.ts";
import { errors } from "../internal/errors.ts";

/** A freshly generated key pair, its private half already sealed. */
export interface SealedKey {
  kind: ChainKind;
  address: string;
  encryptedPrivateKey: Buffer;
}

/** Thrown at start-up when the master key cannot open what the store holds. */
export class MasterKeyMismatchError extends Error {
  override name = "MasterKeyMismatchError";
}

const CANARY_PLAINTEXT = Buffer.from("svc master key canary v1");
const CANARY_AD = "service_keys:master";

/** What the store records of a secret: a keyed hash, from which the secret cannot be read. */
function secretFingerprint(secret: string): Buffer {
  return createHmac("sha256", secret).update("svc secret fingerprint v1").digest();
}

/**
 * Envelope encryption of wallet keys: each wallet has a random data key, sealed under the master key with
 * the wallet id as associated data; each private key is sealed under the data key with `walletId:kind`.
 * A row copied to another wallet or chain therefore fails to open instead of signing for the wrong owner.
 */
export class Keyring {
  readonly #masterKey: Buffer;

  constructor(masterKey: Buffer) {
    this.#masterKey = masterKey;
  }

  /**
   * Confirms the master key is the one this store was created with (recording it on first use), so a wrong
   * key stops start-up with a clear error rather than failing later on every signature.
   */
  async checkAgainst(db: Db, source: string): Promise<void> {
    await db
      .insert(serviceKeys)
      .values({ name: "master", canary: seal(this.#masterKey, CANARY_PLAINTEXT, CANARY_AD) })
      .onConflictDoNothing();
    const [row] = await db.select().from(serviceKeys).where(eq(serviceKeys.name, "master"));
    try {
      if (!row || !open(this.#masterKey, row.canary, CANARY_AD).equals(CANARY_PLAINTEXT)) throw new Error();
    } catch {
      throw new MasterKeyMismatchError(
        `${source} does not match the key this database was created with; wallet keys cannot be opened (instances on one database share SVC_MASTER_KEY)`,
      );
    }
  }

  /**
   * Whether `secret` is the one recorded under `name` for this store (recording it when none is). The record
   * is an HMAC of the secret sealed under the master key: the store alone tells nothing of the secret.
   */
  async compareRecordedSecret(db: Db, name: string, secret: string): Promise<"same" | "different"> {
    await db.insert(serviceKeys).values(this.#secretRecord(name, secret)).onConflictDoNothing();
    const [row] = await db.select().from(serviceKeys).where(eq(serviceKeys.name, name));
    if (!row) throw new Error(`no ${name} record in service_keys`);
    let recorded: Buffer;
    try {
      recorded = open(this.#masterKey, row.canary, `service_keys:${name}`);
    } catch {
      return "different";
    }
    const fingerprint = secretFingerprint(secret);
    return recorded.length === fingerprint.length && timingSafeEqual(recorded, fingerprint)
      ? "same"
      : "different";
  }

  /** Records `secret` under `name` in place of the one recorded ({@link compareRecordedSecret}). */
  async recordSecret(db: Db, name: string, secret: string): Promise<void> {
    const record = this.#secretRecord(name, secret);
    await db
      .insert(serviceKeys)
      .values(record)
      .onConflictDoUpdate({ target: serviceKeys.name, set: { canary: record.canary } });
  }

  #secretRecord(name: string, secret: string): { name: string; canary: Buffer } {
    return { name, canary: seal(this.#masterKey, secretFingerprint(secret), `service_keys:${name}`) };
  }

  /**
   * Seals a secret the service keeps but never shows again (a webhook endpoint's signing secret) under the
   * master key; `associatedData` names its owner (`webhook_endpoints:<id>`), so a sealed value copied to
   * another row does not open there.
   * @example const sealed = keyring.sealSecret(Buffer.from(secret), `webhook_endpoints:${id}`);
   */
  sealSecret(plaintext: Buffer, associatedData: string): Buffer {
    return seal(this.#masterKey, plaintext, associatedData);
  }

  /** Reverses {@link sealSecret}; throws when the value was sealed for another owner or is damaged. */
  openSecret(sealed: Buffer, associatedData: string): Buffer {
    return open(this.#masterKey, sealed, associatedData);
  }

  /** Generates the wallet's data key and one key pair per chain kind, all sealed. */
  generateWalletKeys(
    walletId: string,
    kinds: readonly ChainKind[],
  ): { wrappedDataKey: Buffer; keys: SealedKey[] } {
    const dataKey = newKey();
    try {
      const keys = kinds.map((kind) => {
        const { privateKey, address } = kind === "evm" ? generateEvmKey() : generateSolanaKey();
        const sealed = seal(dataKey, privateKey, `${walletId}:${kind}`);
        privateKey.fill(0);
        return { kind, address, encryptedPrivateKey: sealed };
      });
      return { wrappedDataKey: seal(this.#masterKey, dataKey, walletId), keys };
    } finally {
      dataKey.fill(0);
    }
  }

  /**
   * Opens a wallet's private key for signing. The caller zeroes the buffer when done.
   * For EVM it is the 32-byte secp256k1 secret; for Solana the 32-byte ed25519 seed.
   * A key that does not open for this wallet (another wallet's, or damaged) is `wallet_key_unusable`.
   */
  openPrivateKey(
    walletId: string,
    kind: ChainKind,
    wrappedDataKey: Buffer,
    encryptedPrivateKey: Buffer,
  ): Buffer {
    let dataKey: Buffer | undefined;
    try {
      dataKey = open(this.#masterKey, wrappedDataKey, walletId);
      return open(dataKey, encryptedPrivateKey, `${walletId}:${kind}`);
    } catch (error) {
      throw errors.walletKeyUnusable(walletId, error);
    } finally {
      dataKey?.fill(0);
    }
  }
}

function generateEvmKey(): { privateKey: Buffer; address: string } {
  // secp256k1 from Node's CSPRNG-backed generator.
  const { privateKey } = generateKeyPairSync("ec", { namedCurve: "secp256k1" });
  const d = privateKey.export({ format: "jwk" }).d;
  if (!d) throw new Error("secp256k1 key without a private scalar");
  const secret = Buffer.from(d, "base64url");
  return { privateKey: secret, address: evmAddressOf(secret) };
}

function generateSolanaKey(): { privateKey: Buffer; address: string } {
  const { privateKey, publicKey } = generateKeyPairSync("ed25519");
  const seed = Buffer.from(privateKey.export({ format: "jwk" }).d ?? "", "base64url");
  const rawPublic = Buffer.from(publicKey.export({ format: "jwk" }).x ?? "", "base64url");
  if (seed.length !== 32 || rawPublic.length !== 32) throw new Error("ed25519 key of unexpected size");
  return { privateKey: seed, address: getBase58Decoder().decode(rawPublic) };
}
