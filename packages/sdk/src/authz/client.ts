import { SvcAuthzError } from "../errors.ts";
import { discardBody, type FetchLike, isRedirect, isServiceUrl } from "../transport.ts";
import type {
  SpendAuthorizationResult,
  SpendAuthorizeRequest,
  SpendCancelOutcome,
  SpendSettleRequest,
  SpendSettleResult,
} from "./types.ts";

/**
 * Options of {@link SpendAuthzClient}.
 * @example
 * const options: SpendAuthzClientOptions = { gatewayUrl: "http://127.0.0.1:8421", token };
 */
export interface SpendAuthzClientOptions {
  /** Daemon base URL. */
  gatewayUrl: string;
  /** Daemon bearer token. */
  token: string;
  /** `fetch` to use; default the global one. */
  fetch?: FetchLike;
  /** Per-call timeout; default 30 s. */
  timeoutMs?: number;
}

/**
 * Low-level client of the authorization daemon (spec 4.6): one HTTP call per method, no retries. Every
 * failure to get a well-formed answer (unreachable, 503 not enabled, 403 capability missing, 4xx, a
 * malformed body) is a {@link SvcAuthzError}; a denial is a normal result (`approved: false`).
 * @example
 * const daemon = new SpendAuthzClient({ gatewayUrl: "http://127.0.0.1:8421", token });
 * const verdict = await daemon.authorize({
 *   provider: "svc", network: "eip155:31337", asset: usdc.address, amount: "1000000",
 *   per_call_cap: "10000000", credits: 100, destination: payee,
 * });
 */
export class SpendAuthzClient {
  readonly #url: string;
  readonly #token: string;
  readonly #fetch: FetchLike;
  readonly #timeoutMs: number;

  constructor(options: SpendAuthzClientOptions) {
    if (!isServiceUrl(options.gatewayUrl)) {
      throw new SvcAuthzError(
        "authz.gatewayUrl must be an http:// or https:// URL with no user name or password",
        { reason: "misconfigured" },
      );
    }
    if (typeof options.token !== "string" || options.token === "") {
      throw new SvcAuthzError("authz.token must be a non-empty string", { reason: "misconfigured" });
    }
    this.#url = options.gatewayUrl.replace(/\/+$/, "");
    this.#token = options.token;
    this.#fetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
    this.#timeoutMs = options.timeoutMs ?? 30_000;
  }

  /**
   * Asks the daemon for a verdict (`POST /spend/authorize`).
   * @example
   * const { approved, decisionId, reason } = await daemon.authorize(request);
   */
  async authorize(request: SpendAuthorizeRequest): Promise<SpendAuthorizationResult> {
    const body = await this.#call("/spend/authorize", request);
    const approved = body.approved;
    const decisionId = body.decision_id;
    if (typeof approved !== "boolean" || typeof decisionId !== "string" || decisionId === "") {
      throw malformed("/spend/authorize", "approved (boolean) and decision_id (string) are required");
    }
    if (approved) return { approved, decisionId };
    const reason = typeof body.reason === "string" && body.reason !== "" ? body.reason : "denied";
    return { approved, decisionId, reason };
  }

  /**
   * Settles an approved decision after its broadcast (`POST /spend/settle`); a repeat returns the same receipt.
   * @example
   * const { receiptId } = await daemon.settle({ decision_id, provider, network, asset, amount, credits, tx_sig });
   */
  async settle(request: SpendSettleRequest): Promise<SpendSettleResult> {
    const body = await this.#call("/spend/settle", request);
    if (typeof body.receipt_id !== "string" || typeof body.decision_id !== "string") {
      throw malformed("/spend/settle", "receipt_id and decision_id (strings) are required");
    }
    return { receiptId: body.receipt_id, decisionId: body.decision_id };
  }

  /**
   * Cancels an approved decision that will not be settled (`POST /spend/cancel`), so its reserved credits
   * come back; idempotent on the daemon. The wallet service consumes a decision before it signs, so by the
   * time a refused spend is cancelled the service may have given the decision back already (`released`),
   * or hold it (`consumed`): both are answers, not errors (see {@link SpendCancelOutcome}). Anything else
   * the daemon refuses (unknown decision, settled, …) is a {@link SvcAuthzError}.
   * @example
   * const outcome = await daemon.cancel(decisionId); // "cancelled" | "released" | "consumed"
   */
  async cancel(decisionId: string): Promise<SpendCancelOutcome> {
    try {
      await this.#call("/spend/cancel", { decision_id: decisionId });
      return "cancelled";
    } catch (error) {
      if (error instanceof SvcAuthzError && error.statusCode === 409) {
        if (error.reason === "decision_released") return "released";
        if (error.reason === "decision_consumed") return "consumed";
      }
      throw error;
    }
  }

  async #call(path: string, payload: unknown): Promise<Record<string, unknown>> {
    let response: Response;
    try {
      response = await this.#fetch(this.#url + path, {
        method: "POST",
        headers: { authorization: `Bearer ${this.#token}`, "content-type": "application/json" },
        body: JSON.stringify(payload),
        signal: AbortSignal.timeout(this.#timeoutMs),
        // The daemon never redirects: following a gateway's redirect would send the spend elsewhere.
        redirect: "manual",
      });
    } catch (error) {
      const cause = (error as { cause?: { message?: unknown } }).cause;
      const detail = typeof cause?.message === "string" ? cause.message : String(error);
      throw new SvcAuthzError(`Authorization daemon unreachable at ${this.#url}${path}: ${detail}`, {
        reason: "unreachable",
        cause: error,
      });
    }
    if (isRedirect(response)) {
      discardBody(response);
      throw new SvcAuthzError(
        `The authorization daemon's answer to ${path} is a redirect (HTTP ${response.status}), which is not followed: is gatewayUrl the daemon's own?`,
        { statusCode: response.status, reason: "redirect" },
      );
    }
    let text: string;
    let body: unknown;
    try {
      text = await response.text();
      body = JSON.parse(text);
    } catch (error) {
      throw new SvcAuthzError(
        `Malformed answer from the authorization daemon (${path}, HTTP ${response.status})`,
        {
          statusCode: response.status,
          reason: "malformed_response",
          cause: error,
        },
      );
    }
    const record =
      body !== null && typeof body === "object" && !Array.isArray(body)
        ? (body as Record<string, unknown>)
        : undefined;
    if (!response.ok) {
      // The daemon's errors are `{ error: "<message>", code: "<snake_case>" }`.
      const message = typeof record?.error === "string" ? record.error : `HTTP ${response.status}`;
      const code = typeof record?.code === "string" ? record.code : `http_${response.status}`;
      throw new SvcAuthzError(
        `Authorization daemon refused ${path} (HTTP ${response.status}, ${code}): ${message}`,
        {
          statusCode: response.status,
          reason: code,
        },
      );
    }
    if (record === undefined) throw malformed(path, "the body is not a JSON object");
    return record;
  }
}

function malformed(path: string, why: string): SvcAuthzError {
  return new SvcAuthzError(`Malformed answer from the authorization daemon (${path}): ${why}`, {
    statusCode: 200,
    reason: "malformed_response",
  });
}
