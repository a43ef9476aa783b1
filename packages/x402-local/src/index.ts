/**
 * `@svc/x402-local`: the x402 reference implementation on Svc's local chains, for tests and the local demo.
 * A facilitator built from `@x402/core`'s `x402Facilitator` settling on the devnet, resource servers built
 * from `@x402/express` (v2) and `x402-express` 1.2 (v1), and the chain setup the `exact` scheme needs.
 *
 * @packageDocumentation
 */
export { type DemoDevnet, type LocalDemo, startLocalDemo } from "./demo.ts";
export {
  type DiscoverableResource,
  type FacilitatorDevnet,
  type FacilitatorSettlement,
  type LocalFacilitator,
  type LocalFacilitatorOptions,
  startLocalFacilitator,
} from "./facilitator.ts";
export {
  EVM_V1_NAMES,
  evmNetwork,
  SOLANA_DEVNET_NETWORK,
  SOLANA_DEVNET_V1_NAME,
} from "./networks.ts";
export {
  type PaidRouteV1,
  type PaidRouteV2,
  type PaymentOffer,
  type ResourceServer,
  type ResourceServerOptions,
  startResourceServerV1,
  startResourceServerV2,
} from "./resource-server.ts";
export { createUsdcAccount } from "./solana.ts";
