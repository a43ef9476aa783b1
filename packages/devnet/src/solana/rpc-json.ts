const BIGINT_MARK = "__svc_devnet_bigint__";
const BIGINT_PATTERN = new RegExp(`"${BIGINT_MARK}(-?\\d+)"`, "g");

/**
 * JSON with u64 values as bare JSON numbers, the way a cluster writes them (JSON.stringify cannot write a
 * bigint, and a Number would lose precision above 2^53).
 */
export function stringifyRpc(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    typeof v === "bigint" ? `${BIGINT_MARK}${v}` : v,
  ).replace(BIGINT_PATTERN, "$1");
}
