/**
 * JSON numbers as they were written. `JSON.parse` turns `1e1`, `1.00000000000000001` and `10` alike into
 * doubles and forgets the text (Node 20's reviver has no source text), so a money amount sent as a JSON
 * number could be taken as something else than what the client wrote. {@link parseExactJson} keeps every
 * number whose double reads back as exactly the written decimal, and replaces every other number with an
 * {@link InexactNumber} holding its text, for the schemas of amounts to refuse.
 */

import { randomBytes } from "node:crypto";

/** A JSON number whose double is not exactly the decimal written (or that was written with an exponent). */
export class InexactNumber {
  constructor(readonly source: string) {}
  toJSON(): string {
    return this.source;
  }
}

// The key of the marker object that carries an inexact number through JSON.parse. It holds random bytes
// drawn at start-up, so a client cannot send a marker of its own and have it taken for one.
const MARKER_KEY = `\u0000svc:inexact-number:${randomBytes(16).toString("hex")}`;
const NUMBER_TOKEN = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;

/** True when the number token means exactly the double JavaScript reads from it, written without exponent. */
export function isExactNumberToken(token: string): boolean {
  if (/[eE]/.test(token)) return false;
  let normalised = token.includes(".") ? token.replace(/0+$/, "").replace(/\.$/, "") : token;
  if (normalised === "-0") normalised = "0";
  return String(Number(token)) === normalised;
}

/**
 * Rewrites the JSON text so that every inexact number token becomes a marker object; returns the text
 * unchanged (the same string) when there is none, which is every well-behaved request.
 */
export function markInexactNumbers(text: string): string {
  let out = "";
  let last = 0;
  let i = 0;
  while (i < text.length) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      // Skip the string, escapes included.
      i++;
      while (i < text.length && text.charCodeAt(i) !== 0x22) i += text.charCodeAt(i) === 0x5c ? 2 : 1;
      i++;
      continue;
    }
    if (c === 0x2d /* - */ || (c >= 0x30 && c <= 0x39)) {
      NUMBER_TOKEN.lastIndex = i;
      const match = NUMBER_TOKEN.exec(text);
      if (!match) {
        i++;
        continue;
      }
      const token = match[0];
      if (!isExactNumberToken(token)) {
        out += `${text.slice(last, i)}{${JSON.stringify(MARKER_KEY)}:${JSON.stringify(token)}}`;
        last = i + token.length;
      }
      i += token.length;
      continue;
    }
    i++;
  }
  return last === 0 ? text : out + text.slice(last);
}

/** Replaces the marker objects left by {@link markInexactNumbers} with {@link InexactNumber}s. */
export function restoreInexactNumbers(value: unknown): unknown {
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) value[i] = restoreInexactNumbers(value[i]);
    return value;
  }
  if (value !== null && typeof value === "object") {
    const record = value as Record<string, unknown>;
    const keys = Object.keys(record);
    if (keys.length === 1 && keys[0] === MARKER_KEY && typeof record[MARKER_KEY] === "string") {
      return new InexactNumber(record[MARKER_KEY]);
    }
    for (const key of keys) record[key] = restoreInexactNumbers(record[key]);
  }
  return value;
}
