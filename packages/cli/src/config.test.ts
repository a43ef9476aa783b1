import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { configPath, normalizeBaseUrl, readConfig, resolveCredentials, writeConfig } from "./config.ts";

describe("resolveCredentials", () => {
  const saved = { baseUrl: "http://saved:1/v1", apiKey: "svc_saved" };
  it("takes each value from the flag, else the environment, else the config file", () => {
    const env = { SVC_BASE_URL: "http://env:2/v1", SVC_API_KEY: "svc_env" };
    expect(
      resolveCredentials({ flags: { apiKey: "svc_flag", baseUrl: "http://flag:3/v1" }, env }, saved),
    ).toEqual({
      apiKey: "svc_flag",
      baseUrl: "http://flag:3/v1",
    });
    expect(resolveCredentials({ flags: {}, env }, saved)).toEqual({
      apiKey: "svc_env",
      baseUrl: "http://env:2/v1",
    });
    expect(resolveCredentials({ flags: {}, env: {} }, saved)).toEqual({
      apiKey: "svc_saved",
      baseUrl: "http://saved:1/v1",
    });
    // Independently: a key from the environment, the URL from the file.
    expect(resolveCredentials({ flags: {}, env: { SVC_API_KEY: "svc_env" } }, saved)).toEqual({
      apiKey: "svc_env",
      baseUrl: "http://saved:1/v1",
    });
  });

  it("sends the saved key only to the service it was saved for", () => {
    for (const sources of [
      { flags: { baseUrl: "http://elsewhere:9/v1" }, env: {} },
      { flags: {}, env: { SVC_BASE_URL: "http://elsewhere:9" } },
    ]) {
      expect(resolveCredentials(sources, saved)).toEqual({
        apiKey: undefined,
        baseUrl: "http://elsewhere:9/v1",
        savedKeyFor: "http://saved:1/v1",
      });
    }
    // The same service, spelt as a bare origin, is the one it was saved for.
    expect(resolveCredentials({ flags: { baseUrl: "http://saved:1" }, env: {} }, saved).apiKey).toBe(
      "svc_saved",
    );
    // A key given for the other service is used there.
    expect(
      resolveCredentials(
        { flags: { baseUrl: "http://elsewhere:9/v1" }, env: { SVC_API_KEY: "svc_env" } },
        saved,
      ),
    ).toEqual({ apiKey: "svc_env", baseUrl: "http://elsewhere:9/v1" });
  });

  it("a key saved without a base URL is the local service's; one saved with a broken base URL is nobody's", () => {
    const keyOnly = { apiKey: "svc_saved" };
    expect(resolveCredentials({ flags: {}, env: {} }, keyOnly).apiKey).toBe("svc_saved");
    expect(resolveCredentials({ flags: { baseUrl: "http://elsewhere:9" }, env: {} }, keyOnly)).toMatchObject({
      apiKey: undefined,
      savedKeyFor: "http://127.0.0.1:8080/v1",
    });
    // The flags still work when the file's URL is broken; its key goes nowhere.
    const broken = { baseUrl: "not a url", apiKey: "svc_saved" };
    expect(
      resolveCredentials({ flags: { baseUrl: "http://elsewhere:9", apiKey: "svc_flag" }, env: {} }, broken),
    ).toEqual({ apiKey: "svc_flag", baseUrl: "http://elsewhere:9/v1" });
  });

  it("defaults the base URL to the local service and leaves the key undefined", () => {
    expect(resolveCredentials({ flags: {}, env: {} }, {})).toEqual({
      apiKey: undefined,
      baseUrl: "http://127.0.0.1:8080/v1",
    });
  });
});

describe("normalizeBaseUrl", () => {
  it("adds /v1 to a bare origin, keeps a path, refuses what is not an http URL", () => {
    expect(normalizeBaseUrl("http://127.0.0.1:8080")).toBe("http://127.0.0.1:8080/v1");
    expect(normalizeBaseUrl("https://svc.example.com/")).toBe("https://svc.example.com/v1");
    expect(normalizeBaseUrl("https://svc.example.com/v1/")).toBe("https://svc.example.com/v1");
    expect(() => normalizeBaseUrl("localhost:8080")).toThrow(/must be http/);
    expect(() => normalizeBaseUrl("not a url")).toThrow(/is not a URL/);
  });

  it("refuses a URL holding a user name or password without repeating it, whatever its scheme", () => {
    for (const value of [
      "http://ada:hunter2@127.0.0.1:8080/v1",
      "ftp://ada:hunter2@127.0.0.1/v1",
      // Not a URL (its port out of range), or not http: repeated without what precedes the @.
      "http://ada:hunter2@127.0.0.1:99999/v1",
      "ada:hunter2@127.0.0.1:99999",
      // A password with a / in it (base64 has them), which a URL would hold percent-encoded.
      "http://ada:hunter2/x@127.0.0.1/v1",
      "ada:hunter2/x@127.0.0.1",
    ]) {
      const error = (() => {
        try {
          normalizeBaseUrl(value);
        } catch (e) {
          return e as Error;
        }
      })();
      expect(error?.message).toMatch(/must not hold a user name or password|is not a URL|must be http/);
      expect(error?.message).not.toContain("hunter2");
    }
  });
});

describe("the config file", () => {
  it("is $SVC_CONFIG, else under XDG_CONFIG_HOME, else ~/.config", () => {
    expect(configPath({ SVC_CONFIG: "/tmp/x.json" })).toBe("/tmp/x.json");
    expect(configPath({ XDG_CONFIG_HOME: "/cfg" })).toBe("/cfg/svc/config.json");
    expect(configPath({})).toBe(path.join(os.homedir(), ".config", "svc", "config.json"));
  });

  it("is written 0600 and read back; an absent file is empty, a broken one a clear error", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "svc-config-"));
    try {
      const file = path.join(dir, "svc", "config.json");
      expect(await readConfig(file)).toEqual({});
      await writeConfig(file, {
        baseUrl: "http://a/v1",
        apiKey: "svc_k",
        keyId: "key_1",
        email: "a@example.com",
      });
      expect(fs.statSync(file).mode & 0o777).toBe(0o600);
      expect(await readConfig(file)).toEqual({
        baseUrl: "http://a/v1",
        apiKey: "svc_k",
        keyId: "key_1",
        email: "a@example.com",
      });
      fs.writeFileSync(file, "[1,2]");
      await expect(readConfig(file)).rejects.toThrow(/is not a JSON object/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
