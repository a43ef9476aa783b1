/**
 * `@svc/devnet`: local chains for Svc's start-up wiring and tests.
 *
 * @packageDocumentation
 */
export { type Devnet, type DevnetInfo, type DevnetOptions, startDevnet } from "./devnet.ts";
export { IDLE_BLOCK_SECONDS } from "./evm/anvil.ts";
export {
  type EvmFundingAmounts,
  type EvmFundingReceipt,
  type EvmFundingSource,
  fundEvm,
} from "./evm/fund.ts";
export { MULTICALL3_ADDRESS } from "./evm/multicall3.ts";
export { USDC_DECIMALS, USDC_EIP712, usdcAbi } from "./evm/usdc.ts";
export { devnetInfoToJson } from "./json.ts";
export {
  DEVNET_EVM_CHAIN_ID,
  EVM_TREASURY_ADDRESS,
  EVM_TREASURY_PRIVATE_KEY,
} from "./keys.ts";
export { SOLANA_USDC_DECIMALS } from "./solana/chain.ts";
export {
  fundSolana,
  type SolanaFundingAmounts,
  type SolanaFundingReceipt,
  type SolanaFundingSource,
  sendFromSolanaTreasury,
  waitForConfirmation,
} from "./solana/fund.ts";
