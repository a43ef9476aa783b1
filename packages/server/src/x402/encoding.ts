/** x402 header values: standard padded base64 of UTF-8 JSON (not `btoa` of a JS string). */

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;
const BASE64URL = /^[A-Za-z0-9_-]+$/;

/**
 * Encodes a value as x402 header values are: JSON, UTF-8, standard padded base64.
 * @example encodeHeaderJson({ a: "é" }) // "eyJhIjoiw6kifQ=="
 */
export function encodeHeaderJson(value: unknown): string {
  return Buffer.from(JSON.stringify(value), "utf8").toString("base64");
}

/**
 * Decodes an x402 header value (base64 of UTF-8 JSON; unpadded and URL-safe base64 are read too, as some
 * servers send them). Undefined when it is not base64 of JSON.
 * @example decodeHeaderJson("eyJhIjoiw6kifQ==") // { a: "é" }
 */
export function decodeHeaderJson(value: string): unknown {
  const text = value.trim();
  if (!BASE64.test(text) && !BASE64URL.test(text)) return undefined;
  try {
    return JSON.parse(Buffer.from(text, BASE64.test(text) ? "base64" : "base64url").toString("utf8"));
  } catch {
    return undefined;
  }
}

/** True for a plain JSON object (not null, not an array). */
export function isJsonObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * How deep a JSON document from a server (an x402 challenge, a paid resource's answer) may nest to be read as
 * JSON: far beyond any real one, and well within what re-encoding it can bear (`JSON.stringify` and the
 * reply's serializer recurse, and overflow the stack some thousands of levels down).
 */
export const MAX_JSON_DEPTH = 64;

/**
 * Whether parsed JSON nests arrays and objects more than `max` levels deep (walked without recursion).
 * @example nestsDeeperThan([[[]]], 2) // true
 */
export function nestsDeeperThan(value: unknown, max: number): boolean {
  const stack: { item: unknown; depth: number }[] = [{ item: value, depth: 1 }];
  for (let next = stack.pop(); next !== undefined; next = stack.pop()) {
    const { item, depth } = next;
    if (typeof item !== "object" || item === null) continue;
    if (depth > max) return true;
    for (const child of Array.isArray(item) ? item : Object.values(item))
      stack.push({ item: child, depth: depth + 1 });
  }
  return false;
}
