import { type JWTPayload, errors as joseErrors, jwtVerify, SignJWT } from "jose";
import { randomBase62 } from "../internal/crypto.ts";
import { errors } from "../internal/errors.ts";

/** Lifetime of a login access token, in seconds (spec 2.2). */
export const ACCESS_TOKEN_TTL_SECONDS = 3600;

/** The issuer of every token the service signs (access tokens, login device tokens). */
export const ISSUER = "svc";
const AUDIENCE = "svc-api";
/** The ids a token may carry: an account's (`sub`), and its own (`jti`, base62; `_` allowed). */
const ACCOUNT_ID = /^usr_[0-9A-Za-z]{1,64}$/;
const TOKEN_ID = /^[0-9A-Za-z_]{1,64}$/;

/** Signs and verifies the HS256 access tokens that login hands out. */
export class AccessTokens {
  readonly #key: Uint8Array;
  readonly #now: () => Date;

  constructor(secret: string, now: () => Date = () => new Date()) {
    this.#key = new TextEncoder().encode(secret);
    this.#now = now;
  }

  /** @example const token = await tokens.issue("usr_…"); */
  issue(accountId: string): Promise<string> {
    return signToken(this.#key, {
      subject: accountId,
      audience: AUDIENCE,
      ttlSeconds: ACCESS_TOKEN_TTL_SECONDS,
      now: this.#now(),
    });
  }

  /**
   * Returns the account the token acts for, the token's id and when it expires, or throws Unauthorized
   * (`token_expired` when it expired). The token must name its account (`sub`), itself (`jti`), when it
   * was issued (`iat`) and when it ends (`exp`), and live no longer than {@link ACCESS_TOKEN_TTL_SECONDS}:
   * a token signed with the secret but without those, for longer, or with ids of a form the service never
   * makes, is refused. Whether its owner ended it by logging out is the store's to say (`accessTokenLive`).
   */
  async verify(token: string): Promise<VerifiedAccessToken> {
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, this.#key, {
        algorithms: ["HS256"],
        issuer: ISSUER,
        audience: AUDIENCE,
        requiredClaims: ["sub", "jti", "iat", "exp"],
        maxTokenAge: ACCESS_TOKEN_TTL_SECONDS,
        currentDate: this.#now(),
      }));
    } catch (error) {
      if (error instanceof joseErrors.JWTExpired) throw errors.tokenExpired();
      throw errors.invalidCredentials();
    }
    const { sub, jti, iat, exp } = payload;
    if (
      typeof sub !== "string" ||
      !ACCOUNT_ID.test(sub) ||
      typeof jti !== "string" ||
      !TOKEN_ID.test(jti) ||
      typeof iat !== "number" ||
      typeof exp !== "number"
    )
      throw errors.invalidCredentials();
    if (exp - iat > ACCESS_TOKEN_TTL_SECONDS) throw errors.invalidCredentials();
    return { accountId: sub, tokenId: jti, expiresAt: new Date(exp * 1000) };
  }
}

/** A login access token that verified: whose it is, its id (`jti`) and when it expires. */
export interface VerifiedAccessToken {
  accountId: string;
  tokenId: string;
  expiresAt: Date;
}

/**
 * An HS256 JWT of the service's: `sub`, `aud`, `iss`, a random `jti`, issued `now` and expiring `ttlSeconds`
 * later. Each kind of token has an audience of its own, so none passes for another.
 */
export function signToken(
  key: Uint8Array,
  claims: { subject: string; audience: string; ttlSeconds: number; now: Date },
): Promise<string> {
  const issuedAt = Math.floor(claims.now.getTime() / 1000);
  return new SignJWT({})
    .setProtectedHeader({ alg: "HS256", typ: "JWT" })
    .setSubject(claims.subject)
    .setIssuer(ISSUER)
    .setAudience(claims.audience)
    .setIssuedAt(issuedAt)
    .setJti(randomBase62(16))
    .setExpirationTime(issuedAt + claims.ttlSeconds)
    .sign(key);
}
