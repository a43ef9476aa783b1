import { describe, expect, it } from "vitest";
import { canonicalJson, isCanonicalText } from "./canonical.ts";

describe("canonicalJson", () => {
  it("sorts keys at every level and leaves out whitespace", () => {
    expect(canonicalJson({ b: 1, a: { d: [true, null], c: "x" } })).toBe(
      '{"a":{"c":"x","d":[true,null]},"b":1}',
    );
  });

  it("refuses numbers that are not safe integers", () => {
    expect(() => canonicalJson({ a: 1.5 })).toThrow(/safe integers/);
    expect(() => canonicalJson({ a: 2 ** 53 })).toThrow(/safe integers/);
  });

  it("recognises canonical text and rejects reordered or spaced text", () => {
    const text = canonicalJson({ b: "é\n", a: 2 });
    expect(isCanonicalText(text, JSON.parse(text))).toBe(true);
    const reordered = '{"b":"x","a":2}';
    expect(isCanonicalText(reordered, JSON.parse(reordered))).toBe(false);
    const spaced = '{"a": 2}';
    expect(isCanonicalText(spaced, JSON.parse(spaced))).toBe(false);
    const float = '{"a":2.5}';
    expect(isCanonicalText(float, JSON.parse(float))).toBe(false);
  });
});
