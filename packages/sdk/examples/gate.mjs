// The gate: every send is authorized by the daemon first and settled after its broadcast.
//   SVC_API_KEY=svc_… WALLET=wal_… PAYEE=0x… AUTHZD_URL=http://127.0.0.1:8421 AUTHZD_TOKEN=azd_… node gate.mjs
import { SvcSpendDeniedError, SvcWallet } from "@svc/sdk";

const svc = new SvcWallet({
  apiKey: process.env.SVC_API_KEY,
  baseUrl: process.env.SVC_BASE_URL ?? "http://127.0.0.1:8080/v1",
  authz: { gatewayUrl: process.env.AUTHZD_URL, token: process.env.AUTHZD_TOKEN },
});
const wallet = await svc.wallet.get(process.env.WALLET); // its policy: maxPerTx $5
const to = process.env.PAYEE;

const tx = await wallet.send({ to, amount: 1.5, token: "USDC", chain: "base" });
console.log(
  JSON.stringify({ id: tx.id, status: tx.status, txHash: tx.txHash, spendDecisionId: tx.spendDecisionId }),
);

try {
  await wallet.send({ to, amount: 9, token: "USDC", chain: "base" }); // over the per-call cap ($5 in USDC units)
} catch (error) {
  if (!(error instanceof SvcSpendDeniedError)) throw error;
  console.log(JSON.stringify({ denied: error.reason, decisionId: error.decisionId }));
}
console.log(JSON.stringify({ failedSettlements: svc.authz.listFailedSettlements() }));
