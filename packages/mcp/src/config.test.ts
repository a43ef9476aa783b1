import { describe, expect, it } from "vitest";
import { configFromEnv } from "./config.ts";

describe("svc-mcp's environment", () => {
  it("needs a key, defaults to the local service, and takes the gate's two variables together", () => {
    expect(() => configFromEnv({})).toThrow("SVC_API_KEY is not set");
    expect(configFromEnv({ SVC_API_KEY: "svc_k" })).toEqual({
      apiKey: "svc_k",
      baseUrl: "http://127.0.0.1:8080/v1",
    });
    expect(() => configFromEnv({ SVC_API_KEY: "svc_k", SVC_AUTHZD_URL: "http://127.0.0.1:8421" })).toThrow(
      "go together",
    );
    expect(
      configFromEnv({ SVC_API_KEY: "svc_k", SVC_AUTHZD_URL: "http://127.0.0.1:8421", SVC_AUTHZD_TOKEN: "t" })
        .authz,
    ).toEqual({ gatewayUrl: "http://127.0.0.1:8421", token: "t" });
  });

  it("takes SVC_MCP_CONFIRM_ABOVE as dollars and refuses a malformed one without repeating the key", () => {
    expect(configFromEnv({ SVC_API_KEY: "svc_k", SVC_MCP_CONFIRM_ABOVE: "0.50" }).confirmAboveUsd).toBe(
      "0.50",
    );
    let message = "";
    try {
      configFromEnv({ SVC_API_KEY: "svc_secret", SVC_MCP_CONFIRM_ABOVE: "$5" });
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toContain("SVC_MCP_CONFIRM_ABOVE must be an amount of US dollars");
    expect(message).not.toContain("svc_secret");
  });
});
