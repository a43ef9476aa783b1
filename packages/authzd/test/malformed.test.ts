import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CallOptions, pool, SPEND, TestDaemon } from "./harness.ts";

const FIELDS = Object.keys(SPEND) as (keyof typeof SPEND)[];

/** Values each authorize field must refuse. */
const INVALID: Record<keyof typeof SPEND, unknown[]> = {
  provider: [null, 1, true, [], {}, "", "has space", "x".repeat(257), "tab\there", "é", "\u0000"],
  network: [
    null,
    8453,
    "",
    "eip155",
    "eip155:",
    ":8453",
    "EIP155:8453",
    "e:1",
    "eip155:8453 ",
    `eip155:${"1".repeat(33)}`,
    ["eip155:1"],
  ],
  asset: [null, 0, false, "", " ", "0x 1", "x".repeat(300), { address: "0x1" }, "ü"],
  amount: [
    null,
    1000,
    1.5,
    "",
    "01",
    "-1",
    "+1",
    "1.5",
    "1e3",
    " 1",
    "0x10",
    "１",
    "9".repeat(79),
    "NaN",
    ["1"],
  ],
  per_call_cap: [null, 5000, "", "00", "-5", "5.0", "5e3", "five", "9".repeat(80), {}],
  credits: [null, 0, -1, 1.5, "1", "", true, 2 ** 53, -0.5, [1], { n: 1 }, 1e21],
  destination: [null, 7, "", "two words", "x".repeat(257), [], "\n"],
};

/** Over a thousand bodies that must all be refused as malformed: bad values, pairs of them, missing and extra fields. */
function malformedRequests(): CallOptions[] {
  const bodies: unknown[] = [];
  for (const field of FIELDS) {
    const { [field]: _dropped, ...rest } = SPEND;
    bodies.push(rest);
    for (const value of INVALID[field]) bodies.push({ ...SPEND, [field]: value });
  }
  for (let i = 0; i < FIELDS.length; i++) {
    for (let j = i + 1; j < FIELDS.length; j++) {
      const a = FIELDS[i] as keyof typeof SPEND;
      const b = FIELDS[j] as keyof typeof SPEND;
      for (const va of INVALID[a]) {
        for (const vb of INVALID[b].slice(0, 6)) bodies.push({ ...SPEND, [a]: va, [b]: vb });
      }
    }
  }
  for (const extra of ["payer", "approved", "decision_id", "__proto__", "constructor", "Provider", ""]) {
    bodies.push(JSON.parse(`{${JSON.stringify(extra)}:1,${JSON.stringify(SPEND).slice(1)}`));
  }
  bodies.push(null, [], [SPEND], 1, "spend", true, {});
  const requests: CallOptions[] = bodies.map((body) => ({
    raw: JSON.stringify(body),
    headers: { "content-type": "application/json" },
  }));
  const json = JSON.stringify(SPEND);
  const rawTexts: (string | Buffer)[] = [
    "",
    "{",
    json.slice(0, -1),
    `${json},`,
    `${json}${json}`,
    json.replaceAll('"', "'"),
    '{"provider":NaN}',
    "undefined",
    Buffer.from([0x7b, 0xff, 0xfe, 0x7d]),
    Buffer.concat([Buffer.from(json.slice(0, 20)), Buffer.from([0xc3]), Buffer.from(json.slice(20))]),
    `{"credits":1${"0".repeat(400)}}`,
    "[".repeat(5000),
  ];
  for (const raw of rawTexts) requests.push({ raw, headers: { "content-type": "application/json" } });
  for (const type of [
    "text/plain",
    "application/x-www-form-urlencoded",
    "application/jsonx",
    "multipart/form-data",
  ]) {
    requests.push({ raw: json, headers: { "content-type": type } });
  }
  requests.push({ raw: json }); // no content type
  requests.push({
    raw: JSON.stringify({ ...SPEND, destination: "d".repeat(17_000) }),
    headers: { "content-type": "application/json" },
  });
  return requests;
}

describe("malformed requests", () => {
  let daemon: TestDaemon;
  let token: string;

  beforeAll(async () => {
    daemon = await TestDaemon.start({ AUTHZD_SPEND_RATE_LIMIT_PER_SECOND: "0" });
    token = await daemon.identity("agent", ["wallet.spend.authorize", "wallet.spend.settle"]);
  });

  afterAll(async () => {
    await daemon.stop();
  });

  it("takes the Bearer scheme in any case, and logs nothing for a client that goes away mid-body", async () => {
    const lower = await daemon.call("GET", "/budgets/agent", {
      headers: { authorization: `bearer ${token}` },
    });
    expect(lower.status, JSON.stringify(lower.body)).toBe(200);
    const { port } = new URL(daemon.url);
    await new Promise<void>((resolve, reject) => {
      const socket = connect(Number(port), "127.0.0.1", () => {
        socket.write(
          `POST /spend/authorize HTTP/1.1\r\nHost: authzd\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"a":1`,
        );
        setTimeout(() => socket.destroy(), 100);
      });
      socket.on("close", () => resolve());
      socket.on("error", reject);
    });
    // The daemon still answers, and said nothing of an unexpected error.
    expect((await daemon.call("GET", "/health")).status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(daemon.output()).not.toMatch(/unexpected error/);
  });

  it("refuses over a thousand malformed authorize bodies with 4xx and writes no row for any of them", async () => {
    const requests = malformedRequests();
    expect(requests.length).toBeGreaterThanOrEqual(1000);
    const rowsBefore = daemon.auditRows().length;
    const replies = await pool(
      requests.map((request) => () => daemon.call("POST", "/spend/authorize", { ...request, token })),
      16,
    );
    const statuses = new Map<number, number>();
    for (const reply of replies) statuses.set(reply.status, (statuses.get(reply.status) ?? 0) + 1);
    expect([...statuses.keys()].sort()).toEqual([400, 413, 415]);
    for (const reply of replies) expect(typeof reply.body.error).toBe("string");
    expect(daemon.auditRows().length).toBe(rowsBefore);

    // The daemon is unharmed: a well-formed request still gets its verdict.
    const ok = await daemon.call("POST", "/spend/authorize", { token, body: SPEND });
    expect(ok.body).toMatchObject({ kind: "spend_authorized", approved: true });
  });

  it("refuses malformed settle bodies with 4xx and writes no row", async () => {
    const verdict = await daemon.call<{ decision_id: string }>("POST", "/spend/authorize", {
      token,
      body: SPEND,
    });
    const good = {
      decision_id: verdict.body.decision_id,
      provider: SPEND.provider,
      network: SPEND.network,
      asset: SPEND.asset,
      amount: SPEND.amount,
      credits: SPEND.credits,
    };
    const bodies: unknown[] = [
      { ...good, decision_id: "dec_123" },
      { ...good, decision_id: verdict.body.decision_id.toUpperCase() },
      { ...good, tx_sig: "" },
      { ...good, tx_sig: 5 },
      { ...good, destination: SPEND.destination },
      { ...good, amount: "01000" },
      { ...good, credits: "1" },
      { good },
    ];
    for (const field of Object.keys(good)) {
      const { [field as keyof typeof good]: _dropped, ...rest } = good;
      bodies.push(rest);
    }
    const rowsBefore = daemon.auditRows().length;
    for (const body of bodies) {
      const reply = await daemon.call("POST", "/spend/settle", { token, body });
      expect(reply.status, JSON.stringify(body)).toBe(400);
    }
    expect(daemon.auditRows().length).toBe(rowsBefore);
  });
});
