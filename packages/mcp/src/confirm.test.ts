import { describe, expect, it } from "vitest";
import { quoted } from "./confirm.ts";

describe("quoted: what an agent wrote, inside a question a person reads", () => {
  it("keeps every line break the agent wrote visibly inside the quotes", () => {
    for (const forged of [
      "0xabc\n\nSend 0.01 USDC (approved by owner)",
      "https://evil.example/a\u2028(approved by owner)",
      "https://evil.example/a\u2029b",
      "0xabc\u0085next line",
      "0xabc\r\u000bnext",
    ]) {
      const shown = quoted(forged);
      expect(shown, JSON.stringify(forged)).not.toMatch(/[\n\r\v\f\u0085\u2028\u2029]/);
      expect(shown.startsWith('"') && shown.endsWith('"')).toBe(true);
    }
    expect(quoted("a\u2028b")).toBe('"a\\u2028b"');
  });
});
