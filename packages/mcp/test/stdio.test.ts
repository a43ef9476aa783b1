/**
 * `svc-mcp` over stdio: the bin run as a child process by an MCP client from `@modelcontextprotocol/sdk`,
 * against a real service on the local chains.
 */

import { execFile } from "node:child_process";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../../../test/support/eventually.ts";
import {
  ADMIN_TOOL_NAMES,
  AGENT_TOOL_NAMES,
  BIN,
  call,
  READ_TOOL_NAMES,
  startWorld,
  stdioClient,
  usdcOf,
  type World,
} from "./support.ts";

let world: World;
const clients: Client[] = [];
const open = async (client: Promise<Client>) => {
  const connected = await client;
  clients.push(connected);
  return connected;
};

beforeAll(async () => {
  world = await startWorld();
});
afterAll(async () => {
  for (const client of clients) await client.close();
  await world?.close();
});

describe("svc-mcp over stdio", () => {
  it("offers each role its tools, with input and output schemas; an agent key sees no loosening tool, a read key nothing that acts", async () => {
    const admin = await open(stdioClient(world, world.adminKey));
    const agent = await open(stdioClient(world, world.agentKey));
    const reader = await open(stdioClient(world, world.readKey));
    const adminTools = (await admin.listTools()).tools;
    expect(adminTools.map((t) => t.name).sort()).toEqual(ADMIN_TOOL_NAMES);
    for (const tool of adminTools) {
      expect(tool.inputSchema.type).toBe("object");
      expect(tool.outputSchema?.type, tool.name).toBe("object");
    }
    const agentNames = (await agent.listTools()).tools.map((t) => t.name).sort();
    expect(agentNames).toEqual(AGENT_TOOL_NAMES);
    expect(agentNames).not.toContain("update_policy");
    expect(agentNames).not.toContain("create_agent_key");
    const readerNames = (await reader.listTools()).tools.map((t) => t.name).sort();
    expect(readerNames).toEqual(READ_TOOL_NAMES);
    for (const acting of ["send", "fetch_paid", "pause_wallet", "request_faucet"]) {
      expect(readerNames).not.toContain(acting);
    }
    // The agent key is bound to the payer: that is all it sees.
    const listed = await call(agent, "list_wallets");
    expect(listed.isError).toBe(false);
    expect((listed.structured.wallets as { id: string }[]).map((w) => w.id)).toEqual([world.payer.id]);
  });

  it("sends within the policy (confirmed on the local chain) and refuses over it with the PolicyViolation", async () => {
    const agent = await open(stdioClient(world, world.agentKey));
    const payeeBefore = await usdcOf(world.payee);
    const sent = await call(agent, "send", {
      walletId: world.payer.id,
      to: world.payee.evm?.address,
      amount: "1.5",
      token: "USDC",
      chain: "base",
    });
    expect(sent.isError, sent.text).toBe(false);
    expect(sent.structured).toMatchObject({ type: "send", amount: "1.5", token: "USDC", chain: "base" });
    const confirmed = await eventually(
      async () => {
        const tx = await call(agent, "get_transaction", { transactionId: sent.structured.id });
        return tx.structured.status === "pending" ? undefined : tx;
      },
      { describe: "the send to leave pending" },
    );
    expect(confirmed.structured.status).toBe("confirmed");
    expect(Number(await usdcOf(world.payee))).toBe(Number(payeeBefore) + 1.5);
    // Landed, the send carries the fee it paid, as the service states it, and the schemas say what it is.
    const stated = await world.admin.transactions.get(sent.structured.id as string);
    expect(stated.fee).toEqual({ amount: expect.stringMatching(/^0\.\d+$/), token: "ETH" });
    expect(confirmed.structured.fee).toEqual(stated.fee);
    const tools = (await agent.listTools()).tools;
    for (const name of ["send", "get_transaction"]) {
      const fee = tools.find((tool) => tool.name === name)?.outputSchema?.properties?.fee as
        | { description?: string; properties?: Record<string, unknown> }
        | undefined;
      expect(fee?.description, name).toMatch(/^A spend that landed on chain .* native coin/);
      expect(Object.keys(fee?.properties ?? {}), name).toEqual(["amount", "token"]);
    }
    expect(tools.find((tool) => tool.name === "get_transaction")?.description).toMatch(/the fee it paid/);

    const refused = await call(agent, "send", {
      walletId: world.payer.id,
      to: world.payee.evm?.address,
      amount: "25",
      chain: "base",
    });
    expect(refused.isError).toBe(true);
    expect(refused.text).toBe("Per-transaction limit of $10.00 exceeded: this spend is $25.00");
    expect(refused.structured).toMatchObject({ code: "PolicyViolation", reason: "max_per_tx" });
    expect(refused.structured.requestId).toMatch(/^req_/);
  });

  it("pays the local x402 demo it discovers, within maxAmount", async () => {
    const agent = await open(stdioClient(world, world.agentKey));
    const found = await call(agent, "discover_services", { query: "weather" });
    const services = found.structured.services as { resource: string }[];
    expect(services.map((s) => s.resource)).toContain(world.demoUrl);
    const before = await usdcOf(world.payer);
    const paid = await call(agent, "fetch_paid", {
      walletId: world.payer.id,
      url: world.demoUrl,
      maxAmount: "0.05",
    });
    expect(paid.isError, paid.text).toBe(false);
    expect(paid.structured).toMatchObject({
      status: 200,
      body: { city: "Lisbon", forecast: "sunny" },
      amountCharged: "0.01",
      transaction: { type: "x402", status: "confirmed", resource: world.demoUrl },
    });
    expect(Number(await usdcOf(world.payer))).toBeCloseTo(Number(before) - 0.01, 6);

    const tooDear = await call(agent, "fetch_paid", {
      walletId: world.payer.id,
      url: world.demoUrl,
      maxAmount: "0.001",
    });
    expect(tooDear.isError).toBe(true);
    expect(tooDear.structured.code).toBe("ValidationError");
  });

  it("asks the person above SVC_MCP_CONFIRM_ABOVE: accepted pays, declined and unaskable move nothing", async () => {
    const asked: string[] = [];
    let answer: "accept" | "decline" = "accept";
    const env = { SVC_MCP_CONFIRM_ABOVE: "2" };
    const agent = await open(
      stdioClient(world, world.agentKey, {
        env,
        person: (message) => {
          asked.push(message);
          return answer === "accept"
            ? { action: "accept", content: { confirm: true } }
            : { action: "decline" };
        },
      }),
    );
    const send = (amount: string) =>
      call(agent, "send", { walletId: world.payer.id, to: world.payee.evm?.address, amount, chain: "base" });
    const historyTotal = async () =>
      (await call(agent, "list_transactions", { walletId: world.payer.id, type: "send" })).structured.total;

    // Below the threshold: nobody is asked.
    expect((await send("1")).isError).toBe(false);
    expect(asked).toEqual([]);

    const accepted = await send("3");
    expect(accepted.isError, accepted.text).toBe(false);
    expect(accepted.structured).toMatchObject({ type: "send", amount: "3" });
    expect(asked).toHaveLength(1);
    expect(asked[0]).toContain("Send 3 USDC on base");
    expect(asked[0]).toContain("$3.00");
    // The wallet's name is quoted too: it is text someone wrote, not part of the question.
    expect(asked[0]).toContain(`from "payer" (${world.payer.id})`);

    // What the agent wrote is quoted in the question: a recipient that carries a second line of its own
    // cannot pass itself off as part of the question (the service refuses the address afterwards).
    const forged = `${world.payee.evm?.address}\n\nSend 0.01 USDC (approved by owner)`;
    await call(agent, "send", { walletId: world.payer.id, to: forged, amount: "6", chain: "base" });
    expect(asked[1]).toContain(`to ${JSON.stringify(forged)} ($6.00)`);
    expect(asked[1]).not.toContain("\n");
    asked.length = 1;

    answer = "decline";
    const sendsBefore = await historyTotal();
    const declined = await send("4");
    expect(declined.isError).toBe(true);
    expect(declined.structured).toMatchObject({
      code: "ConfirmationRequired",
      reason: "confirmation_declined",
    });
    expect(declined.text).toContain("nothing was sent");
    expect(await historyTotal()).toBe(sendsBefore);

    const fetchDeclined = await call(agent, "fetch_paid", {
      walletId: world.payer.id,
      url: world.demoUrl,
      maxAmount: "5",
    });
    expect(fetchDeclined.structured.reason).toBe("confirmation_declined");
    expect(asked).toHaveLength(3);

    // A client that cannot elicit is told why, and nothing is sent.
    const mute = await open(stdioClient(world, world.agentKey, { env }));
    const refused = await call(mute, "send", {
      walletId: world.payer.id,
      to: world.payee.evm?.address,
      amount: "4",
      chain: "base",
    });
    expect(refused.isError).toBe(true);
    expect(refused.structured.reason).toBe("confirmation_unavailable");
    expect(refused.text).toContain("does not support elicitation");
    expect(await historyTotal()).toBe(sendsBefore);
  });

  it("a bad key: one line on stderr naming the service's refusal, exit 1, the key not repeated", async () => {
    const badKey = "svc_not_a_real_key_0000000000000000";
    const { code, stderr } = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      execFile(
        process.execPath,
        [BIN],
        { env: { ...process.env, SVC_API_KEY: badKey, SVC_BASE_URL: world.baseUrl } },
        (error, _stdout, stderr) => resolve({ code: error ? (error.code as number) : 0, stderr }),
      );
    });
    expect(code).toBe(1);
    expect(stderr.trim().split("\n")).toHaveLength(1);
    expect(stderr).toMatch(/^svc-mcp: the service refused the credential .*Unauthorized/);
    expect(stderr).not.toContain(badKey);
  });
});
