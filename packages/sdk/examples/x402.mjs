// x402: an agent finds a paid resource in the facilitator's discovery and pays for it with wallet.fetch.
//   SVC_API_KEY=svc_… WALLET=wal_… node x402.mjs
import { SvcWallet } from "@svc/sdk";

const svc = new SvcWallet({
  apiKey: process.env.SVC_API_KEY,
  baseUrl: process.env.SVC_BASE_URL ?? "http://127.0.0.1:8080/v1",
});
const wallet = await svc.wallet.get(process.env.WALLET);
const usdc = async () =>
  (await wallet.balance()).balances.find((b) => b.chain === "base" && b.token === "USDC")?.amount;

// 1. What can be bought (npm start lists its local demo here).
const [weather] = (await svc.x402.discover({ query: "weather" })).filter((s) => s.x402Version === 2);
console.log(JSON.stringify({ resource: weather.resource, description: weather.description }));

// 2. Fetch it: the resource answers 402, the service pays from the wallet within its policy, and retries.
const before = await usdc();
const response = await wallet.fetch(weather.resource, { maxAmount: "0.05" });
console.log(response.status, JSON.stringify(await response.json()));
console.log(JSON.stringify(response.transaction));

// 3. The payment in the history, and the balance it moved.
const [latest] = (await wallet.transactions({ type: "x402", limit: 1 })).data;
console.log(JSON.stringify({ history: { type: latest.type, status: latest.status, amount: latest.amount } }));
console.log(JSON.stringify({ usdcBefore: before, usdcAfter: await usdc() }));
