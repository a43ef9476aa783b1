import fs from "node:fs";
import { afterEach, describe, expect, it, vi } from "vitest";
import { tempHome } from "../testing.ts";
import { acquireHomeLock, ensureHome, homePaths } from "./home.ts";

afterEach(() => vi.restoreAllMocks());

describe("the home lock", () => {
  it("leaves no temp file behind when writing the pid file fails part-way (a full disk)", () => {
    const paths = homePaths(tempHome());
    ensureHome(paths);
    const write = fs.writeFileSync;
    vi.spyOn(fs, "writeFileSync").mockImplementation((file, data, options) => {
      if (String(file).endsWith(".tmp")) {
        write(file, String(data).slice(0, 1), options);
        throw Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC" });
      }
      return write(file, data, options);
    });
    expect(() => acquireHomeLock(paths)).toThrow(/ENOSPC/);
    vi.restoreAllMocks();
    const dir = fs.readdirSync(fs.realpathSync(`${paths.pidFile}/..`));
    expect(dir.filter((name) => name.endsWith(".tmp"))).toEqual([]);
    // The next start takes the home.
    const release = acquireHomeLock(paths);
    release();
  });
});
