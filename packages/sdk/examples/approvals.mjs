// The README's human in the loop: spends above $5 wait for the owner; the event log tells what happened.
//   SVC_BASE_URL=http://127.0.0.1:8080/v1 SVC_ADMIN_KEY=svc_… PAYEE=0x… node approvals.mjs
import { SvcWallet } from "@svc/sdk";

const baseUrl = process.env.SVC_BASE_URL ?? "http://127.0.0.1:8080/v1";
const admin = new SvcWallet({ apiKey: process.env.SVC_ADMIN_KEY, baseUrl });

// 1. The owner: a wallet whose spends above $5 need approval, and an alert above $2.
const wallet = await admin.wallet.create({
  name: "careful agent",
  chains: ["base"],
  policy: { approvalAbove: "5", alertAbove: "2" },
});
await wallet.faucet({ chain: "base", token: "ETH", amount: "0.01" });
await wallet.faucet({ chain: "base", token: "USDC", amount: "100" });
const { key } = await admin.apiKeys.create({ name: "careful agent", role: "agent", walletIds: [wallet.id] });

// 2. The agent sends $7: held for approval (HTTP 202), not an error.
const agent = new SvcWallet({ apiKey: key, baseUrl });
const mine = await agent.wallet.get(wallet.id);
const held = await mine.send({ to: process.env.PAYEE, amount: 7, token: "USDC", chain: "base" });
console.log(JSON.stringify({ id: held.id, status: held.status, approval: held.approval }));

// 3. The agent cannot approve its own spend; the owner sees it waiting and approves it.
await agent.approvals.approve(held.id).catch((error) => {
  console.log(JSON.stringify({ agentApproves: error.name, reason: error.reason }));
});
const waiting = await admin.approvals.list();
console.log(JSON.stringify(waiting.map(({ id, amount, expiresAt }) => ({ id, amount, expiresAt }))));
await admin.approvals.approve(held.id);
const done = await mine.waitForTransaction(held.id, { timeoutMs: 120_000 });
console.log(JSON.stringify({ status: done.status, txHash: done.txHash }));

// 4. The event log, followed until the spend's confirmation is in it (at most a minute).
const events = admin.events.iterate({
  walletId: wallet.id,
  follow: true,
  signal: AbortSignal.timeout(60_000),
});
for await (const event of events) {
  const about = event.type === "spend.alert" ? event.data.transaction.id : event.data.id;
  console.log(JSON.stringify({ type: event.type, about }));
  if (event.type === "transaction.confirmed" && about === held.id) break;
}
