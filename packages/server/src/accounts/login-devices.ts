import { createHash } from "node:crypto";
import { jwtVerify } from "jose";
import { ISSUER, signToken } from "./access-tokens.ts";

/** How long a device that logged in is known by its token, in seconds (30 days); each login renews it. */
export const LOGIN_DEVICE_TTL_SECONDS = 30 * 24 * 3600;

/** Not the access tokens' audience: a device token is no credential, and an access token no device token. */
const AUDIENCE = "svc-login-device";

/**
 * Device tokens: what a successful login hands back so that the next login from the same client is known
 * to come from a device that once had the password. The per-email login limit counts everyone who tries an
 * email, so anyone who knows the owner's email could keep the owner out with a few wrong passwords a minute;
 * a login that brings its device token is counted by that device instead (api.md: the per-email limit
 * still holds for every client without one). The token names the email by its hash, not in clear, and
 * grants nothing else: it is not a credential, and a wrong password with it is still a wrong password.
 */
export class LoginDevices {
  readonly #key: Uint8Array;
  readonly #now: () => Date;

  constructor(secret: string, now: () => Date = () => new Date()) {
    this.#key = new TextEncoder().encode(secret);
    this.#now = now;
  }

  /** A token for a device that has just logged in to `email` (normalised). */
  issue(email: string): Promise<string> {
    return signToken(this.#key, {
      subject: emailDigest(email),
      audience: AUDIENCE,
      ttlSeconds: LOGIN_DEVICE_TTL_SECONDS,
      now: this.#now(),
    });
  }

  /**
   * The device's id when `token` is a live device token for `email` (normalised); undefined otherwise (not
   * one, expired, another email's): a login then counts as from an unknown device, not as an error.
   */
  async deviceOf(token: string, email: string): Promise<string | undefined> {
    try {
      const { payload } = await jwtVerify(token, this.#key, {
        algorithms: ["HS256"],
        issuer: ISSUER,
        audience: AUDIENCE,
        subject: emailDigest(email),
        requiredClaims: ["jti", "iat", "exp"],
        maxTokenAge: LOGIN_DEVICE_TTL_SECONDS,
        currentDate: this.#now(),
      });
      return typeof payload.jti === "string" ? payload.jti : undefined;
    } catch {
      return undefined;
    }
  }
}

function emailDigest(email: string): string {
  return createHash("sha256").update(`login-device:${email}`).digest("base64url");
}
