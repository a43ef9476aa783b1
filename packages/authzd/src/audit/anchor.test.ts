import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { AnchorError, anchorFileFor, readAnchorSync, writeAnchor, writeAnchorSync } from "./anchor.ts";
import { GENESIS_HASH } from "./rows.ts";

describe("head anchor file", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "authzd-anchor-"));
  const file = path.join(dir, "audit.head");

  it("sits beside the log", () => {
    expect(anchorFileFor("/var/lib/authzd/audit.jsonl")).toBe("/var/lib/authzd/audit.head");
    expect(anchorFileFor("/backup/copy.log")).toBe("/backup/copy.log.head");
  });

  it("round-trips, and is absent (null) before the first write", async () => {
    expect(readAnchorSync(file)).toBeNull();
    writeAnchorSync(file, { rows: 3, headHash: "a".repeat(64) });
    expect(readAnchorSync(file)).toEqual({ rows: 3, headHash: "a".repeat(64) });
    await writeAnchor(file, { rows: 4, headHash: "b".repeat(64) });
    expect(readAnchorSync(file)).toEqual({ rows: 4, headHash: "b".repeat(64) });
    expect(fs.readdirSync(dir)).toEqual(["audit.head"]);
  });

  it("refuses a file that is not an anchor", () => {
    for (const text of [
      "",
      "{",
      "[]",
      `{"rows":-1,"headHash":"${"a".repeat(64)}"}`,
      `{"rows":1.5,"headHash":"${"a".repeat(64)}"}`,
      '{"rows":1,"headHash":"xyz"}',
      `{"rows":0,"headHash":"${"a".repeat(64)}"}`,
      `{"rows":1,"headHash":"${"a".repeat(64)}","extra":1}`,
    ]) {
      fs.writeFileSync(file, text);
      expect(() => readAnchorSync(file), text).toThrow(AnchorError);
    }
    fs.writeFileSync(file, JSON.stringify({ rows: 0, headHash: GENESIS_HASH }));
    expect(readAnchorSync(file)).toEqual({ rows: 0, headHash: GENESIS_HASH });
  });
});
