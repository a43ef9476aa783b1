/**
 * POST /v1/x402/fetch against resource servers that an agent was talked into fetching and that answer to
 * break the service: every answer is described (a 4xx or 502 with its reason, or the resource's answer),
 * never a 500, and a payment made is always reported.
 */
import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { createKeyPairSignerFromPrivateKeyBytes } from "@solana/kit";
import { fundEvm, fundSolana } from "@svc/devnet";
import { privateKeyToAddress } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { encodeHeaderJson } from "../src/x402/encoding.ts";
import { eventually } from "./support/eventually.ts";
import {
  createTestServer,
  expectErrorShape,
  seedAccount,
  sharedDevnet,
  type TestServer,
} from "./support/test-server.ts";

let server: TestServer;
let owner: Awaited<ReturnType<typeof seedAccount>>;

beforeAll(async () => {
  await sharedDevnet();
  // The devnet profile: base and solana on the local chains, loopback exempt from the outbound guard.
  server = await createTestServer({ env: { SVC_CONFIRMER_INTERVAL_MS: "3600000" } });
  owner = await seedAccount(server.api);
});
afterAll(() => server.close());

/** A resource server on loopback answering every request with `handle`. */
async function resource(handle: (request: IncomingMessage, response: ServerResponse) => void) {
  const listening = createServer(handle);
  await new Promise<void>((resolve) => listening.listen(0, "127.0.0.1", resolve));
  onTestFinished(
    () =>
      new Promise<void>((resolve) => {
        listening.closeAllConnections();
        listening.close(() => resolve());
      }),
  );
  return `http://127.0.0.1:${(listening.address() as AddressInfo).port}/paid`;
}

/** A JSON array nested `depth` levels deep, as text. */
const nested = (depth: number) => `${"[".repeat(depth)}${"]".repeat(depth)}`;

async function evmRequirement() {
  const devnet = await sharedDevnet();
  return {
    scheme: "exact",
    network: `eip155:${devnet.evm.chainId}`,
    amount: "10000",
    asset: devnet.evm.usdc as string,
    payTo: privateKeyToAddress(`0x${randomBytes(32).toString("hex")}`),
    maxTimeoutSeconds: 60,
    extra: devnet.evm.usdcEip712,
  };
}

/** Answers 402 with a v2 challenge of `requirement` in the PAYMENT-REQUIRED header. */
const challengeOf = (requirement: unknown) => (_request: IncomingMessage, response: ServerResponse) => {
  response
    .writeHead(402, { "payment-required": encodeHeaderJson({ x402Version: 2, accepts: [requirement] }) })
    .end("{}");
};

async function fundedWallet() {
  const created = await server.api.post(
    "/v1/wallets",
    { name: "payer", chains: ["base", "solana"] },
    owner.apiKey,
  );
  expect(created.status, created.text).toBe(201);
  const devnet = await sharedDevnet();
  await fundEvm(devnet, created.body.evm.address, { usdc: 1_000_000n });
  await fundSolana(devnet, created.body.solana.address, { usdc: 1_000_000n });
  return created.body as { id: string };
}

const paidFetch = (walletId: string, url: string, headers?: Record<string, string>) =>
  server.api.post("/v1/x402/fetch", { walletId, url }, owner.apiKey, headers);

async function historyOf(walletId: string) {
  const page = await server.api.get(`/v1/wallets/${walletId}/transactions?type=x402`, owner.apiKey);
  return page.body.data as { id: string; status: string; amount: string }[];
}

describe("a hostile x402 resource server", () => {
  it("naming its asset with an uppercase 0X is not paid: 400 no_payable_requirement", async () => {
    const requirement = await evmRequirement();
    requirement.asset = `0X${requirement.asset.slice(2)}`;
    const wallet = await fundedWallet();
    const answer = await paidFetch(wallet.id, await resource(challengeOf(requirement)));
    expect(answer.status, answer.text).toBe(400);
    expect(expectErrorShape(answer).reason).toBe("no_payable_requirement");
    expect(await historyOf(wallet.id)).toEqual([]);
  });

  it("sending a challenge nested deeper than any real one, in its body or its header, is answered 502 invalid_payment_challenge", async () => {
    const requirement = await evmRequirement();
    const wallet = await fundedWallet();
    const deepExtensions = (depth: number) =>
      `{"x402Version":2,"accepts":[${JSON.stringify(requirement)}],"extensions":{"x":${nested(depth)}}}`;
    const deepScheme = (depth: number) => `{"x402Version":1,"accepts":[{"scheme":${nested(depth)}}]}`;
    const urls: string[] = [];
    // In a body (up to 2 MiB), thousands of levels: re-encoding any part of it overflowed the stack (a 500).
    for (const document of [deepExtensions(20_000), deepScheme(20_000)]) {
      urls.push(
        await resource((_request, response) => {
          response.writeHead(402, { "content-type": "application/json" }).end(document);
        }),
      );
    }
    // In a header (whose size is bounded), a hundred levels are refused the same way.
    urls.push(
      await resource((_request, response) => {
        response
          .writeHead(402, { "payment-required": Buffer.from(deepExtensions(100)).toString("base64") })
          .end("{}");
      }),
    );
    for (const url of urls) {
      const answer = await paidFetch(wallet.id, url);
      expect(answer.status, answer.text).toBe(502);
      expect(expectErrorShape(answer).reason).toBe("invalid_payment_challenge");
    }
    expect(await historyOf(wallet.id)).toEqual([]);
  });

  it("answering a paid request with JSON nested thousands of levels deep: the payment is reported, the answer passed as text", async () => {
    const requirement = await evmRequirement();
    const deep = `{"x":${nested(20_000)}}`;
    const url = await resource((request, response) => {
      if (typeof request.headers["payment-signature"] !== "string")
        return challengeOf(requirement)(request, response);
      response.writeHead(200, { "content-type": "application/json" }).end(deep);
    });
    const wallet = await fundedWallet();
    const answer = await paidFetch(wallet.id, url, { "idempotency-key": "deep-answer" });
    expect(answer.status, answer.text).toBe(200);
    expect(answer.body).toMatchObject({ status: 200, body: deep, amountCharged: "0.01" });
    const [payment] = await historyOf(wallet.id);
    expect(answer.body.transactionId).toBe(payment?.id);
    // The same key answers the same.
    const again = await paidFetch(wallet.id, url, { "idempotency-key": "deep-answer" });
    expect(again.status, again.text).toBe(200);
    expect(again.body.transactionId).toBe(payment?.id);
    expect(await historyOf(wallet.id)).toHaveLength(1);
  });

  it("answering a paid request with JSON holding a NUL and an unpaired surrogate: the same key answers the same", async () => {
    const requirement = await evmRequirement();
    const url = await resource((request, response) => {
      if (typeof request.headers["payment-signature"] !== "string")
        return challengeOf(requirement)(request, response);
      response
        .writeHead(200, { "content-type": "application/json" })
        .end('{"data":"a\\u0000b","s":"\\ud800"}');
    });
    const wallet = await fundedWallet();
    const key = `unstorable-${randomBytes(4).toString("hex")}`;
    const answer = await paidFetch(wallet.id, url, { "idempotency-key": key });
    expect(answer.status, answer.text).toBe(200);
    expect(answer.body.body).toEqual({ data: "a\u0000b", s: "\ud800" });
    // Its answer was remembered (it failed to be stored, and a retry waited, then answered 409, then 502).
    const again = await paidFetch(wallet.id, url, { "idempotency-key": key });
    expect(again.status, again.text).toBe(200);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.text).toBe(answer.text);
    expect(await historyOf(wallet.id)).toHaveLength(1);
  });

  it("refusing a payment it never settles, on an idle local chain: the payment ends failed once its time is up", async () => {
    const requirement = { ...(await evmRequirement()), maxTimeoutSeconds: 3 };
    const url = await resource(challengeOf(requirement)); // the paid request is answered 402 again
    const wallet = await fundedWallet();
    const answer = await paidFetch(wallet.id, url);
    expect(answer.status, answer.text).toBe(200);
    expect(answer.body).toMatchObject({ status: 402, transaction: { status: "pending" } });
    // Nothing else happens on the chain meanwhile: only its own idle blocks carry its time past the
    // authorization's validBefore (before, the payment stayed pending, counted against the daily limit).
    const [failed] = await eventually(async () => {
      await server.service.confirmer.runOnce();
      const history = await historyOf(wallet.id);
      return history[0]?.status === "failed" && history;
    });
    expect(failed).toMatchObject({ amount: "0.01" });
  });

  it("naming a program the payment invokes as its Solana fee payer is not paid: 400 no_payable_requirement", async () => {
    const devnet = await sharedDevnet();
    const chains = await server.api.get("/v1/chains", owner.apiKey);
    const solana = (chains.body as { name: string; network: string }[]).find((c) => c.name === "solana");
    const wallet = await fundedWallet();
    for (const program of [
      "ComputeBudget111111111111111111111111111111",
      "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA",
      "MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr",
    ]) {
      const requirement = {
        scheme: "exact",
        network: solana?.network,
        amount: "10000",
        asset: devnet.solana.usdcMint,
        payTo: (await createKeyPairSignerFromPrivateKeyBytes(randomBytes(32))).address,
        maxTimeoutSeconds: 60,
        extra: { feePayer: program },
      };
      const answer = await paidFetch(wallet.id, await resource(challengeOf(requirement)));
      expect(answer.status, answer.text).toBe(400);
      expect(expectErrorShape(answer).reason).toBe("no_payable_requirement");
    }
    expect(await historyOf(wallet.id)).toEqual([]);
  });

  /**
   * A paid fetch whose resource holds back its 402 while the owner ends the credential that asked: nothing is
   * signed for it, and the answer is the 401 its next request would get.
   */
  async function endedWhileThe402IsHeld(
    credential: (walletId: string) => Promise<{ token: string; end: () => Promise<void> }>,
    reason: string,
  ) {
    const wallet = await fundedWallet();
    const { token, end } = await credential(wallet.id);
    const requirement = await evmRequirement();
    let asked!: () => void;
    const firstAsked = new Promise<void>((resolve) => (asked = resolve));
    let answer402!: () => void;
    const mayAnswer = new Promise<void>((resolve) => (answer402 = resolve));
    let paid = false;
    const url = await resource(async (request, response) => {
      if (typeof request.headers["payment-signature"] === "string") {
        paid = true;
        response.writeHead(200, { "content-type": "application/json" }).end("{}");
        return;
      }
      asked();
      await mayAnswer;
      challengeOf(requirement)(request, response);
    });
    const fetching = server.api.post("/v1/x402/fetch", { walletId: wallet.id, url }, token);
    await firstAsked;
    await end();
    answer402();
    const answer = await fetching;
    expect(answer.status, answer.text).toBe(401);
    expect(expectErrorShape(answer).reason).toBe(reason);
    expect(paid).toBe(false);
    expect(await historyOf(wallet.id)).toEqual([]);
  }

  it("holding its 402 while the owner revokes the agent's key: nothing is signed for the revoked key, 401 key_revoked", async () => {
    await endedWhileThe402IsHeld(async (walletId) => {
      const agent = await server.api.post(
        "/v1/api-keys",
        { name: "agent", role: "agent", walletIds: [walletId] },
        owner.apiKey,
      );
      expect(agent.status, agent.text).toBe(201);
      return {
        token: agent.body.key as string,
        end: async () => {
          const revoked = await server.api.delete(`/v1/api-keys/${agent.body.id}`, owner.apiKey);
          expect(revoked.status, revoked.text).toBe(204);
        },
      };
    }, "key_revoked");
  });

  it("holding its 402 while the owner logs out the login whose token was copied: nothing is signed, 401 token_ended", async () => {
    await endedWhileThe402IsHeld(async () => {
      const login = await server.api.post("/v1/auth/login", { email: owner.email, password: owner.password });
      const token = login.body.accessToken as string;
      return {
        token,
        end: async () => {
          const ended = await server.api.post("/v1/auth/logout", undefined, token);
          expect(ended.status, ended.text).toBe(204);
        },
      };
    }, "token_ended");
  });

  it("holding its 402 until the login's access token has expired: nothing is signed, 401 token_expired", async () => {
    const login = await server.api.post("/v1/auth/login", { email: owner.email, password: owner.password });
    try {
      await endedWhileThe402IsHeld(
        async () => ({
          token: login.body.accessToken as string,
          end: async () => server.clock.advance(3601_000),
        }),
        "token_expired",
      );
    } finally {
      server.clock.reset();
    }
  });
});
