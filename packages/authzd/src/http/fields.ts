import { ATOMIC_AMOUNT } from "../internal/config.ts";
import { errors } from "../internal/errors.ts";

/**
 * Checks that an admin request body is an object with exactly the given keys (optional ones may be
 * absent) and returns it.
 */
export function objectWithKeys(
  body: unknown,
  required: string[],
  optional: string[] = [],
): Record<string, unknown> {
  if (body === null || typeof body !== "object" || Array.isArray(body)) {
    throw errors.invalidBody("body must be a JSON object");
  }
  const record = body as Record<string, unknown>;
  for (const key of Object.keys(record)) {
    if (!required.includes(key) && !optional.includes(key)) {
      throw errors.invalidBody(`unknown field ${JSON.stringify(key)}`);
    }
  }
  for (const key of required) {
    if (!Object.hasOwn(record, key)) throw errors.invalidBody(`${key} is required`);
  }
  return record;
}

/** A required non-empty string field. */
export function stringField(record: Record<string, unknown>, key: string): string {
  const value = record[key];
  if (typeof value !== "string" || value === "")
    throw errors.invalidBody(`${key} must be a non-empty string`);
  return value;
}

/** An optional field that is a string or null when present. */
export function optionalString(record: Record<string, unknown>, key: string): string | null {
  const value = record[key];
  if (value === undefined || value === null) return null;
  if (typeof value !== "string") throw errors.invalidBody(`${key} must be a string`);
  return value;
}

/** An optional non-negative safe integer, or null when absent. */
export function optionalCount(record: Record<string, unknown>, key: string): number | null {
  const value = record[key];
  if (value === undefined || value === null) return null;
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0) {
    throw errors.invalidBody(`${key} must be a non-negative integer`);
  }
  return value;
}

/** An optional atomic-unit amount (decimal string without sign, fraction or leading zeros), or null. */
export function optionalAtomic(record: Record<string, unknown>, key: string): string | null {
  const value = record[key];
  if (value === undefined || value === null) return null;
  if (typeof value !== "string" || !ATOMIC_AMOUNT.test(value)) {
    throw errors.invalidBody(
      `${key} must be a decimal string of atomic units without sign, fraction or leading zeros, e.g. "5000000"`,
    );
  }
  return value;
}

/** The last path segment, URL-decoded (the `:name` of a route); 400 when its escapes are malformed. */
export function lastSegment(path: string): string {
  try {
    return decodeURIComponent(path.slice(path.lastIndexOf("/") + 1));
  } catch {
    throw errors.invalidPath(path);
  }
}
