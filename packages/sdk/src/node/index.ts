/**
 * `@svc/sdk/node`: Node-only extras. The main entry stays free of `node:` imports so browsers can load it.
 * @example
 * import { FileSettlementStore } from "@svc/sdk/node";
 * @packageDocumentation
 */
export { FileSettlementStore } from "./file-store.ts";
