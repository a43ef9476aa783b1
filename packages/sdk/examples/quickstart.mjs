// The README's five-minute path: an admin key sets up a wallet and its policy, an agent key sends.
//   SVC_BASE_URL=http://127.0.0.1:8080/v1 SVC_ADMIN_KEY=svc_… PAYEE=0x… node quickstart.mjs
import { SvcError, SvcWallet } from "@svc/sdk";

const baseUrl = process.env.SVC_BASE_URL ?? "http://127.0.0.1:8080/v1";

// 1. The owner (an admin key, or the login access token) creates a wallet with a policy and funds it.
const admin = new SvcWallet({ apiKey: process.env.SVC_ADMIN_KEY, baseUrl });
const wallet = await admin.wallet.create({
  name: "research agent",
  chains: ["base"],
  policy: { maxPerTx: "10", dailyLimit: "50" },
});
await wallet.faucet({ chain: "base", token: "ETH", amount: "0.01" }); // gas (local and test networks only)
await wallet.faucet({ chain: "base", token: "USDC", amount: "100" });

// 2. The owner gives the agent a key that can spend from this wallet only, within its policy.
const { key } = await admin.apiKeys.create({ name: "research agent", role: "agent", walletIds: [wallet.id] });

// 3. The agent sends.
const agent = new SvcWallet({ apiKey: key, baseUrl });
const mine = await agent.wallet.get(wallet.id);
const tx = await mine.send({ to: process.env.PAYEE, amount: 1.5, token: "USDC", chain: "base" });
console.log(JSON.stringify(tx));

// 4. Over the policy: refused by the service, nothing moves.
try {
  await mine.send({ to: process.env.PAYEE, amount: 25, token: "USDC", chain: "base" });
} catch (error) {
  if (!(error instanceof SvcError)) throw error;
  console.log(JSON.stringify({ code: error.code, reason: error.reason, message: error.message }));
}
