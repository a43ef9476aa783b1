import type { DevnetInfo } from "./devnet.ts";

/**
 * The devnet's facts as plain JSON (what `svc-devnet` prints): drops `stop()` and turns byte arrays into
 * number arrays (the `solana-keygen` key file layout).
 *
 * @example
 * ```ts
 * console.log(JSON.stringify(devnetInfoToJson(devnet)));
 * ```
 */
export function devnetInfoToJson(devnet: DevnetInfo): Record<string, unknown> {
  return JSON.parse(
    JSON.stringify(
      { evm: devnet.evm, solana: devnet.solana, treasury: devnet.treasury },
      (_key, value: unknown) => (value instanceof Uint8Array ? Array.from(value) : value),
    ),
  ) as Record<string, unknown>;
}
