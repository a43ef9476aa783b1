import { SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "./support/eventually.ts";
import {
  createTestServer,
  expectErrorShape,
  seedAccount,
  slowRequest,
  TEST_JWT_SECRET,
  type TestServer,
} from "./support/test-server.ts";

let server: TestServer;
beforeAll(async () => {
  server = await createTestServer();
});
afterAll(() => server.close());

describe("POST /v1/auth/register", () => {
  it("creates an account and returns userId, email and createdAt", async () => {
    const response = await server.api.post("/v1/auth/register", {
      email: "Ada@Example.com",
      password: "twelve-chars-at-least",
      name: "Ada",
    });
    expect(response.status).toBe(201);
    expect(response.body).toMatchObject({ email: "ada@example.com", name: "Ada" });
    expect(response.body.userId).toMatch(/^usr_[0-9A-Za-z]{22}$/);
    expect(new Date(response.body.createdAt).toISOString()).toBe(response.body.createdAt);
    expect(response.text).not.toContain("twelve-chars-at-least");
  });

  it("rejects a second account for the same email, in any case, with 409 email_taken", async () => {
    await server.api.post("/v1/auth/register", {
      email: "dup@example.com",
      password: "twelve-chars-at-least",
    });
    const again = await server.api.post("/v1/auth/register", {
      email: "DUP@example.com",
      password: "another-password-1",
    });
    expect(again.status).toBe(409);
    expect(expectErrorShape(again)).toMatchObject({ code: "ValidationError", reason: "email_taken" });
  });

  it.each([
    ["a malformed email", { email: "not-an-email", password: "twelve-chars-at-least" }],
    ["a password of 11 characters", { email: "short@example.com", password: "elevenchars" }],
    ["no password", { email: "nopw@example.com" }],
    ["an unknown field", { email: "extra@example.com", password: "twelve-chars-at-least", admin: true }],
    ["a non-string name", { email: "name@example.com", password: "twelve-chars-at-least", name: 5 }],
  ])("rejects %s with 400 ValidationError", async (_label, body) => {
    const response = await server.api.post("/v1/auth/register", body);
    expect(response.status).toBe(400);
    expect(expectErrorShape(response)).toMatchObject({ code: "ValidationError", reason: "invalid_body" });
  });

  it("admits exactly one of 50 simultaneous registrations of one email", async () => {
    const email = "race@example.com";
    const responses = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        server.api.post("/v1/auth/register", { email, password: `racing-password-${i}` }),
      ),
    );
    const statuses = responses.map((r) => r.status);
    expect(statuses.filter((s) => s === 201)).toHaveLength(1);
    expect(statuses.filter((s) => s === 409)).toHaveLength(49);
    for (const r of responses.filter((r) => r.status === 409))
      expect(expectErrorShape(r).reason).toBe("email_taken");
  });
});

describe("POST /v1/auth/login", () => {
  it("returns an access token valid for 3600 seconds that authenticates API routes", async () => {
    await server.api.post("/v1/auth/register", {
      email: "login@example.com",
      password: "twelve-chars-at-least",
    });
    const login = await server.api.post("/v1/auth/login", {
      email: "login@example.com",
      password: "twelve-chars-at-least",
    });
    expect(login.status).toBe(200);
    expect(login.body.expiresIn).toBe(3600);
    expect(login.body.accessToken.split(".")).toHaveLength(3);
    const wallets = await server.api.get("/v1/wallets", login.body.accessToken);
    expect(wallets.status).toBe(200);
    expect(wallets.body).toEqual([]);
  });

  it("ends an access token's life 3600 seconds after login, by the service's clock", async () => {
    const email = "hour@example.com";
    const password = "twelve-chars-at-least";
    await server.api.post("/v1/auth/register", { email, password });
    const { accessToken } = (await server.api.post("/v1/auth/login", { email, password })).body;
    server.clock.advance(3599_000);
    try {
      expect((await server.api.get("/v1/wallets", accessToken)).status).toBe(200);
      server.clock.advance(2_000);
      const expired = await server.api.get("/v1/wallets", accessToken);
      expect(expired.status).toBe(401);
      expect(expectErrorShape(expired)).toMatchObject({ code: "Unauthorized", reason: "token_expired" });
      // A new login then gives a token that works at that time.
      const again = (await server.api.post("/v1/auth/login", { email, password })).body.accessToken;
      expect((await server.api.get("/v1/wallets", again)).status).toBe(200);
    } finally {
      server.clock.reset();
    }
  });

  it("answers an unknown email and a wrong password identically", async () => {
    await server.api.post("/v1/auth/register", {
      email: "known@example.com",
      password: "twelve-chars-at-least",
    });
    const wrong = await server.api.post("/v1/auth/login", {
      email: "known@example.com",
      password: "wrong-password-12",
    });
    const unknown = await server.api.post("/v1/auth/login", {
      email: "nobody@example.com",
      password: "wrong-password-12",
    });
    expect(wrong.status).toBe(401);
    expect(unknown.status).toBe(401);
    const a = expectErrorShape(wrong);
    const b = expectErrorShape(unknown);
    expect({ ...a, requestId: "" }).toEqual({ ...b, requestId: "" });
  });

  it("rejects an access token signed with another secret, an expired one, and junk", async () => {
    const { userId } = await seedAccount(server.api);
    const forged = await new SignJWT({})
      .setProtectedHeader({ alg: "HS256" })
      .setSubject(userId)
      .setIssuer("svc")
      .setAudience("svc-api")
      .setExpirationTime("1h")
      .sign(new TextEncoder().encode("another-secret-another-secret-xx"));
    const expired = await new SignJWT({})
      .setProtectedHeader({ alg: "HS256" })
      .setSubject(userId)
      .setIssuer("svc")
      .setAudience("svc-api")
      .setJti("tok_expired")
      .setIssuedAt(Math.floor(Date.now() / 1000) - 7200)
      .setExpirationTime(Math.floor(Date.now() / 1000) - 3600)
      .sign(new TextEncoder().encode(TEST_JWT_SECRET));
    const forgedResponse = await server.api.get("/v1/wallets", forged);
    expect(forgedResponse.status).toBe(401);
    expect(expectErrorShape(forgedResponse).reason).toBe("invalid_credentials");
    const expiredResponse = await server.api.get("/v1/wallets", expired);
    expect(expiredResponse.status).toBe(401);
    expect(expectErrorShape(expiredResponse).reason).toBe("token_expired");
    const junk = await server.api.get("/v1/wallets", "not-a-token");
    expect(expectErrorShape(junk)).toMatchObject({ code: "Unauthorized", reason: "invalid_credentials" });
    const none = await server.api.get("/v1/wallets");
    expect(none.status).toBe(401);
    expect(expectErrorShape(none).reason).toBe("missing_credentials");
  });

  it("refuses a token signed with the secret but missing sub, jti, iat or exp, living over an hour, naming no account, or with ids the service never makes", async () => {
    const { userId } = await seedAccount(server.api);
    const now = Math.floor(Date.now() / 1000);
    const sign = (claims: { sub?: string; jti?: string; iat?: number; exp?: number }) => {
      let jwt = new SignJWT({}).setProtectedHeader({ alg: "HS256" }).setIssuer("svc").setAudience("svc-api");
      if (claims.sub !== undefined) jwt = jwt.setSubject(claims.sub);
      if (claims.jti !== undefined) jwt = jwt.setJti(claims.jti);
      if (claims.iat !== undefined) jwt = jwt.setIssuedAt(claims.iat);
      if (claims.exp !== undefined) jwt = jwt.setExpirationTime(claims.exp);
      return jwt.sign(new TextEncoder().encode(TEST_JWT_SECRET));
    };
    // The control: all four claims, an hour's life, a real account.
    const jti = "tok_control";
    const good = await sign({ sub: userId, jti, iat: now, exp: now + 3600 });
    expect((await server.api.get("/v1/wallets", good)).status).toBe(200);
    const bad = {
      "no sub": await sign({ jti, iat: now, exp: now + 3600 }),
      "no jti": await sign({ sub: userId, iat: now, exp: now + 3600 }),
      "no iat": await sign({ sub: userId, jti, exp: now + 3600 }),
      "no exp": await sign({ sub: userId, jti, iat: now }),
      "a day's life": await sign({ sub: userId, jti, iat: now, exp: now + 86_400 }),
      "an unknown account": await sign({ sub: "usr_0000000000000000000000", jti, iat: now, exp: now + 3600 }),
      // Not ids the service makes; a NUL cannot even be stored in a PostgreSQL text column (a 500 before).
      "a sub with a NUL": await sign({ sub: `${userId}\u0000`, jti, iat: now, exp: now + 3600 }),
      "a jti with a NUL": await sign({ sub: userId, jti: "tok\u0000", iat: now, exp: now + 3600 }),
      "a sub of another kind": await sign({
        sub: "wal_0000000000000000000000",
        jti,
        iat: now,
        exp: now + 3600,
      }),
      "a 5 kB jti": await sign({ sub: userId, jti: "j".repeat(5000), iat: now, exp: now + 3600 }),
    };
    for (const [why, token] of Object.entries(bad)) {
      const response = await server.api.get("/v1/wallets", token);
      expect(response.status, why).toBe(401);
      expect(expectErrorShape(response).code, why).toBe("Unauthorized");
    }
  });
});

describe("an access token that expires while its request is under way", () => {
  it("acts for nothing once it has expired, though it was live when its request began: no key made", async () => {
    const owner = await seedAccount(server.api);
    server.clock.advance(3599_000);
    try {
      const taken = () => server.logs.lines.filter((line) => line.includes('"url":"/v1/api-keys"')).length;
      const before = taken();
      const slow = slowRequest(server.url, "POST", "/v1/api-keys", owner.accessToken, {
        name: "minted-after-expiry",
        role: "admin",
      });
      // Authenticated while live: the service took its request in (its log says so), then had time to check it.
      await eventually(() => taken() > before);
      await new Promise((resolve) => setTimeout(resolve, 300));
      server.clock.advance(120_000);
      const answer = await slow.finish();
      expect(answer.status, answer.text).toBe(401);
      expect(JSON.parse(answer.text).error.reason).toBe("token_expired");
    } finally {
      server.clock.reset();
    }
    const keys = (await server.api.get("/v1/api-keys", owner.apiKey)).body as { name: string }[];
    expect(keys.map((key) => key.name)).not.toContain("minted-after-expiry");
  });
});

describe("POST /v1/auth/logout", () => {
  it("ends this login's access token at once, and no other: a copied token stops working", async () => {
    const { email, password, apiKey } = await seedAccount(server.api);
    const login = async () =>
      (await server.api.post("/v1/auth/login", { email, password })).body.accessToken as string;
    const [ended, other] = [await login(), await login()];
    expect((await server.api.get("/v1/wallets", ended)).status).toBe(200);

    const logout = await server.api.post("/v1/auth/logout", undefined, ended);
    expect(logout.status, logout.text).toBe(204);
    for (const response of [
      await server.api.get("/v1/wallets", ended),
      await server.api.post("/v1/api-keys", { name: "kept", role: "admin" }, ended),
      await server.api.post("/v1/auth/logout", undefined, ended),
    ]) {
      expect(response.status).toBe(401);
      expect(expectErrorShape(response)).toMatchObject({ code: "Unauthorized", reason: "token_ended" });
    }
    // Another login of the account, and its keys, still work.
    expect((await server.api.get("/v1/wallets", other)).status).toBe(200);
    expect((await server.api.get("/v1/wallets", apiKey)).status).toBe(200);
    // A key is revoked, not logged out.
    const withKey = await server.api.post("/v1/auth/logout", undefined, apiKey);
    expect(withKey.status).toBe(400);
    expect(expectErrorShape(withKey).reason).toBe("not_an_access_token");
  });
});

describe("login rate limits", () => {
  it("limits attempts per email and per client address with 429 and Retry-After", async () => {
    const limited = await createTestServer({ env: { SVC_LOGIN_LIMIT_PER_MINUTE: "3" } });
    try {
      const email = "limited@example.com";
      await limited.api.post("/v1/auth/register", { email, password: "twelve-chars-at-least" });
      const attempts = [];
      for (let i = 0; i < 4; i++)
        attempts.push(await limited.api.post("/v1/auth/login", { email, password: "wrong-password-12" }));
      expect(attempts.map((r) => r.status)).toEqual([401, 401, 401, 429]);
      const limitedResponse = attempts[3];
      if (!limitedResponse) throw new Error("no response");
      expect(expectErrorShape(limitedResponse)).toMatchObject({
        code: "RateLimitExceeded",
        details: { scope: "login_email" },
      });
      expect(Number(limitedResponse.headers.get("retry-after"))).toBeGreaterThan(0);
      // Even the right password is refused while the email is limited.
      const right = await limited.api.post("/v1/auth/login", { email, password: "twelve-chars-at-least" });
      expect(right.status).toBe(429);

      // Per address: 3 × 3 = 9 counted attempts (3 above; the ones refused per email were not counted), then 429.
      const spray = [];
      for (let i = 0; i < 8; i++) {
        spray.push(
          (await limited.api.post("/v1/auth/login", { email: `spray${i}@example.com`, password: "x" }))
            .status,
        );
      }
      expect(spray).toEqual([401, 401, 401, 401, 401, 401, 429, 429]);
    } finally {
      await limited.close();
    }
  });

  it("counts a device that logged in before by itself: others' guesses at the email do not keep it out", async () => {
    const limited = await createTestServer({
      env: { SVC_LOGIN_LIMIT_PER_MINUTE: "3", SVC_TRUST_PROXY: "127.0.0.1" },
    });
    const from = (address: string) => ({ "x-forwarded-for": address });
    try {
      const email = "owner-device@example.com";
      const password = "twelve-chars-at-least";
      await limited.api.post("/v1/auth/register", { email, password });
      const first = await limited.api.post(
        "/v1/auth/login",
        { email, password },
        undefined,
        from("203.0.113.1"),
      );
      expect(first.status).toBe(200);
      const { deviceToken } = first.body as { deviceToken: string };
      expect(deviceToken).toEqual(expect.any(String));
      // Another registered account's device token names its own email only.
      await limited.api.post("/v1/auth/register", { email: "other-device@example.com", password });
      const otherDevice = (
        await limited.api.post(
          "/v1/auth/login",
          { email: "other-device@example.com", password },
          undefined,
          from("203.0.113.1"),
        )
      ).body.deviceToken as string;

      // Someone else uses up the email's attempts from elsewhere.
      const useUpTheEmail = async () => {
        for (let i = 0; i < 3; i++)
          await limited.api.post(
            "/v1/auth/login",
            { email, password: "wrong-password-12" },
            undefined,
            from("198.51.100.7"),
          );
        const guess = await limited.api.post(
          "/v1/auth/login",
          { email, password: "wrong-password-12" },
          undefined,
          from("198.51.100.7"),
        );
        expect(guess.status).toBe(429);
        expect(expectErrorShape(guess).details).toMatchObject({ scope: "login_email" });
      };
      await useUpTheEmail();

      // Without its token, or with one that is not this email's device token, the owner waits too.
      for (const token of [undefined, otherDevice, "not-a-device-token", first.body.accessToken]) {
        const refused = await limited.api.post(
          "/v1/auth/login",
          { email, password, ...(token ? { deviceToken: token } : {}) },
          undefined,
          from("203.0.113.1"),
        );
        expect(refused.status).toBe(429);
      }
      // With it, the owner logs in, and gets a token again.
      const owner = await limited.api.post(
        "/v1/auth/login",
        { email, password, deviceToken },
        undefined,
        from("203.0.113.1"),
      );
      expect(owner.status).toBe(200);
      expect((await limited.api.get("/v1/wallets", owner.body.accessToken)).status).toBe(200);
      expect(owner.body.deviceToken).toEqual(expect.any(String));

      // The device token is no credential.
      const asBearer = await limited.api.get("/v1/wallets", deviceToken);
      expect(asBearer.status).toBe(401);
      // It does not lift the limit on guessing either: the device's own attempts are limited like the email's.
      const withDevice = [];
      for (let i = 0; i < 3; i++)
        withDevice.push(
          (
            await limited.api.post(
              "/v1/auth/login",
              { email, password: "wrong-password-12", deviceToken },
              undefined,
              from("203.0.113.1"),
            )
          ).status,
        );
      expect(withDevice).toEqual([401, 401, 429]);
      // A device token counts for 30 days. The limiter's minute follows the service's clock too, so the
      // email's attempts are used up again at each moment looked at.
      const loginWith = async (token: string) =>
        limited.api.post(
          "/v1/auth/login",
          { email, password, deviceToken: token },
          undefined,
          from("203.0.113.1"),
        );
      limited.clock.advance(29 * 24 * 3600 * 1000);
      await useUpTheEmail();
      const renewed = await loginWith(owner.body.deviceToken);
      expect(renewed.status).toBe(200);
      limited.clock.advance(31 * 24 * 3600 * 1000);
      await useUpTheEmail();
      expect((await loginWith(renewed.body.deviceToken)).status).toBe(429);
    } finally {
      await limited.close();
    }
  });
});
