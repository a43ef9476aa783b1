import { hash, verify } from "@node-rs/argon2";
import { eq, lt, sql } from "drizzle-orm";
import { newId } from "../internal/crypto.ts";
import { accounts, endedAccessTokens } from "../internal/db/schema.ts";
import { type Db, holdCredential, selectRows, type Tx, withDomainErrors } from "../internal/db/store.ts";
import { errors } from "../internal/errors.ts";

/** argon2id, 64 MiB, 3 passes: OWASP's first recommended setting. */
// `algorithm: 2` is Argon2id (a const enum in the package that verbatimModuleSyntax cannot import).
const ARGON2_OPTIONS = { algorithm: 2, memoryCost: 65536, timeCost: 3, parallelism: 1 } as const;

/** Verified against when the email is unknown, so both failures cost the same time. */
const dummyHash = hash("svc-login-timing-equaliser", ARGON2_OPTIONS);

export interface Account {
  id: string;
  email: string;
  name: string | null;
  createdAt: Date;
}

/** Emails compare case-insensitively: one mailbox, one account. */
export function normaliseEmail(email: string): string {
  return email.trim().toLowerCase();
}

/**
 * Creates an account; a second account for the same email fails with `email_taken`, however many race.
 * @example await registerAccount(db, { email: "a@example.com", password: "correct horse battery" });
 */
export async function registerAccount(
  db: Db,
  input: { email: string; password: string; name?: string | undefined },
): Promise<Account> {
  // Twelve spaces pass a length check and are the first thing a guesser tries.
  if (/^\s*$/u.test(input.password)) throw errors.weakPassword("The password must not be only whitespace");
  const email = normaliseEmail(input.email);
  const passwordHash = await hash(input.password, ARGON2_OPTIONS);
  // The unique index decides the race between simultaneous registrations.
  const [row] = await withDomainErrors(
    () =>
      db
        .insert(accounts)
        .values({ id: newId("usr"), email, name: input.name ?? null, passwordHash })
        .returning(),
    { accounts_email_key: () => errors.emailTaken() },
  );
  if (!row) throw errors.internal(new Error("insert returned no row"));
  return { id: row.id, email: row.email, name: row.name, createdAt: row.createdAt };
}

/** Returns the account id for a correct email and password; otherwise one indistinguishable failure. */
export async function verifyLogin(db: Db, emailInput: string, password: string): Promise<string> {
  const email = normaliseEmail(emailInput);
  const [row] = await db
    .select({ id: accounts.id, passwordHash: accounts.passwordHash })
    .from(accounts)
    .where(eq(accounts.email, email));
  const ok = await verify(row?.passwordHash ?? (await dummyHash), password).catch(() => false);
  if (!row || !ok) throw errors.loginFailed();
  return row.id;
}

/**
 * The account a credential belongs to. Credentials are checked to name an existing account before any
 * route runs, so an absent one is a fault, not a caller's error.
 * @example const { email } = await getAccount(db, principal.accountId);
 */
export async function getAccount(db: Db, accountId: string): Promise<Account> {
  const [row] = await db
    .select({ id: accounts.id, email: accounts.email, name: accounts.name, createdAt: accounts.createdAt })
    .from(accounts)
    .where(eq(accounts.id, accountId));
  if (!row) throw new Error(`account ${accountId} of an authenticated credential does not exist`);
  return row;
}

/**
 * Refuses an access token that has expired by `now` (401 `token_expired`: it was live when its request
 * was authenticated, but a request may take long to send its body or, for a payment, to be answered), whose
 * account is gone (401 `invalid_credentials`) or which its owner ended by logging out (401 `token_ended`);
 * checked for every request an access token makes, in one read. With
 * `hold`, inside a spend's transaction, the account's logins are held ({@link holdCredential}) until it
 * ends, which a logout ({@link endAccessToken}) takes exclusive: a logout waits for a spend already being
 * admitted, and every later one waits for the logout and sees the token ended (held first, read after).
 */
export async function ensureAccessTokenLive(
  db: Db | Tx,
  token: { accountId: string; tokenId: string; expiresAt: Date },
  now: Date,
  options: { hold?: boolean } = {},
): Promise<void> {
  if (token.expiresAt.getTime() <= now.getTime()) throw errors.tokenExpired();
  if (options.hold) await holdCredential(db, token.accountId, "shared");
  const [row] = await selectRows<{ ended: boolean }>(
    db,
    sql`SELECT EXISTS (SELECT 1 FROM ended_access_tokens WHERE jti = ${token.tokenId}) AS ended
        FROM accounts WHERE id = ${token.accountId}`,
  );
  if (!row) throw errors.invalidCredentials();
  if (row.ended) throw errors.tokenEnded();
}

/**
 * Locks the account's row until the transaction ends. What is counted against one of the account's limits
 * (wallets, API keys, webhook endpoints) is counted and inserted under it, so racing creations cannot pass
 * the limit together. It is `FOR NO KEY UPDATE`, so rows that only refer to the account (its events) are
 * written meanwhile.
 */
export async function lockAccount(tx: Tx, accountId: string): Promise<void> {
  await selectRows(tx, sql`SELECT id FROM accounts WHERE id = ${accountId} FOR NO KEY UPDATE`);
}

/**
 * Ends a login access token before it expires (logging out): it is refused from then on, on every
 * instance, by spends already being admitted too (they finish first: {@link ensureAccessTokenLive} with `hold`).
 * Ending it twice is ending it once; rows of tokens that would have expired by now go.
 */
export async function endAccessToken(
  db: Db,
  token: { accountId: string; tokenId: string; expiresAt: Date },
): Promise<void> {
  await db.transaction(async (tx) => {
    await holdCredential(tx, token.accountId, "exclusive");
    await tx
      .insert(endedAccessTokens)
      .values({ jti: token.tokenId, expiresAt: token.expiresAt })
      .onConflictDoNothing();
    await tx.delete(endedAccessTokens).where(lt(endedAccessTokens.expiresAt, new Date()));
  });
}
