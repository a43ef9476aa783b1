/** A JSON value as stored in audit rows. */
export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

/**
 * Canonical JSON: object keys sorted by UTF-16 code unit, no whitespace, strings escaped as
 * `JSON.stringify` does, numbers restricted to safe integers. Two encoders that follow these rules
 * produce the same bytes for the same row, so the row hash can be recomputed anywhere.
 *
 * @example
 * canonicalJson({ b: 1, a: [true, null] }); // '{"a":[true,null],"b":1}'
 */
export function canonicalJson(value: JsonValue): string {
  if (value === null || typeof value === "boolean" || typeof value === "string") return JSON.stringify(value);
  if (typeof value === "number") {
    if (!Number.isSafeInteger(value))
      throw new TypeError(`canonical JSON allows only safe integers, got ${value}`);
    return String(value);
  }
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  const keys = Object.keys(value).sort();
  let out = "{";
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i] as string;
    if (i > 0) out += ",";
    out += `${JSON.stringify(key)}:${canonicalJson(value[key] as JsonValue)}`;
  }
  return `${out}}`;
}

/**
 * Whether `text` is already the canonical encoding of `parsed` (its own parse). Cheaper than
 * re-encoding: V8's `JSON.stringify` keeps the parsed key order, so equal output plus sorted keys at
 * every level means the text was canonical.
 */
export function isCanonicalText(text: string, parsed: JsonValue): boolean {
  return JSON.stringify(parsed) === text && keysSortedDeep(parsed);
}

function keysSortedDeep(value: JsonValue): boolean {
  if (value === null || typeof value !== "object") {
    return typeof value !== "number" || Number.isSafeInteger(value);
  }
  if (Array.isArray(value)) return value.every(keysSortedDeep);
  let previous: string | undefined;
  for (const key in value) {
    if (previous !== undefined && !(previous < key)) return false;
    previous = key;
    if (!keysSortedDeep(value[key] as JsonValue)) return false;
  }
  return true;
}
