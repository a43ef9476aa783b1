import { errors } from "../internal/errors.ts";

/** A spend decision as the authorization daemon reports it (`POST /spend/consume`, `GET /spend/decisions/:id`). */
export interface SpendDecision {
  decisionId: string;
  payer: string;
  approved: boolean;
  reason: string | undefined;
  network: string;
  asset: string;
  /** Atomic units, decimal digits. */
  amount: string;
  destination: string;
  /** What the daemon's budget counts for it: the value the agent stated, in whole US cents (at least 1). */
  credits: number;
  expiresAt: Date;
  state: "approved" | "denied" | "settled" | "cancelled" | "released" | "consumed" | "expired";
}

/**
 * What the daemon answered to a consume: the decision is now this service's to spend once, or it was
 * not consumable (`decision` says why by its state), or the daemon knows no such decision.
 */
export type ConsumeAnswer =
  | { consumed: true; decision: SpendDecision }
  | { consumed: false; decision: SpendDecision; code: string | undefined }
  | { consumed: false; decision: undefined };

/** Where the client reports what it cannot tell its caller (a release that did not happen). */
export interface AuthzdLog {
  warn(fields: Record<string, unknown>, message: string): void;
}

const STATES = new Set<SpendDecision["state"]>([
  "approved",
  "denied",
  "settled",
  "cancelled",
  "released",
  "consumed",
  "expired",
]);
const CALL_TIMEOUT_MS = 5_000;

/**
 * Talks to the authorization daemon as the service's own identity (capability `wallet.spend.verify`).
 * The service consumes a decision before signing the spend it admits, and releases it when that spend is
 * refused before anything was signed; it never authorizes or settles for a client (api.md).
 * @example
 * const daemon = new AuthzdClient({ url: "http://127.0.0.1:8421", token: "azd_…" }, logger);
 * const answer = await daemon.consumeDecision("dec_…");
 * if (answer.consumed) await daemon.releaseDecision("dec_…"); // the spend was refused after all
 */
export class AuthzdClient {
  readonly #url: string;
  readonly #token: string;
  readonly #log: AuthzdLog | undefined;

  constructor(config: { url: string; token: string }, log?: AuthzdLog) {
    this.#url = config.url;
    this.#token = config.token;
    this.#log = log;
  }

  /**
   * Consumes the decision with this id (`POST /spend/consume`): atomically at the daemon, only an
   * approved, unexpired decision that nobody cancelled, settled or consumed is consumed, and from then
   * on its payer can no longer cancel it. Any answer other than consumed (200 with this decision, approved
   * and now consumed), not consumable (409 with the decision) or unknown (404 `decision_not_found`) is
   * `authzd_unavailable`: a spend is never admitted on a decision not consumed.
   */
  async consumeDecision(decisionId: string): Promise<ConsumeAnswer> {
    const { status, body } = await this.#post("/spend/consume", decisionId).catch((error: unknown) => {
      throw errors.authzdUnavailable(error);
    });
    if (isDecisionNotFound(status, body)) return { consumed: false, decision: undefined };
    const record = status === 409 && isRecord(body) ? body.decision : body;
    const decision = status === 200 || status === 409 ? parseDecision(record) : undefined;
    if (decision?.decisionId !== decisionId)
      throw errors.authzdUnavailable(new Error(`decision consume answered ${status} without the decision`));
    if (status === 409)
      return {
        consumed: false,
        decision,
        code: isRecord(body) && typeof body.code === "string" ? body.code : undefined,
      };
    if (!decision.approved || decision.state !== "consumed")
      throw errors.authzdUnavailable(
        new Error(`decision consume answered 200 with a decision ${decision.state}, not consumed`),
      );
    return { consumed: true, decision };
  }

  /**
   * Gives back a decision this service consumed, because the spend it was consumed for was refused
   * before anything was signed (`POST /spend/release`): the payer's credits come back. Best effort: it
   * never throws, so that the caller's refusal stands; when the daemon does not release (unreachable,
   * or it answers anything but 200), that is logged and the decision stays consumed, its credits
   * counted against the payer's budget until they leave the daemon's window (fail closed).
   */
  async releaseDecision(decisionId: string): Promise<boolean> {
    try {
      const { status, body } = await this.#post("/spend/release", decisionId);
      if (status === 200) return true;
      const code = isRecord(body) && typeof body.code === "string" ? body.code : undefined;
      this.#log?.warn(
        { decisionId, status, code },
        "the authorization daemon did not release a decision whose spend was refused; its credits stay counted",
      );
    } catch (error) {
      this.#log?.warn(
        { decisionId, err: error },
        "could not reach the authorization daemon to release a decision whose spend was refused; its credits stay counted",
      );
    }
    return false;
  }

  /**
   * The decision with this id as the daemon holds it (`GET /spend/decisions/:id`), or undefined when it knows
   * none (404 `decision_not_found`). Any other answer is `authzd_unavailable`.
   */
  async getDecision(decisionId: string): Promise<SpendDecision | undefined> {
    let status: number;
    let body: unknown;
    try {
      const response = await fetch(`${this.#url}/spend/decisions/${encodeURIComponent(decisionId)}`, {
        headers: { authorization: `Bearer ${this.#token}` },
        signal: AbortSignal.timeout(CALL_TIMEOUT_MS),
        redirect: "manual",
      });
      status = response.status;
      body = await response.json().catch(() => undefined);
    } catch (error) {
      throw errors.authzdUnavailable(error);
    }
    if (isDecisionNotFound(status, body)) return undefined;
    const decision = status === 200 ? parseDecision(body) : undefined;
    if (decision?.decisionId !== decisionId)
      throw errors.authzdUnavailable(new Error(`decision lookup answered ${status} without the decision`));
    return decision;
  }

  async #post(path: string, decisionId: string): Promise<{ status: number; body: unknown }> {
    const response = await fetch(`${this.#url}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${this.#token}`, "content-type": "application/json" },
      body: JSON.stringify({ decision_id: decisionId }),
      signal: AbortSignal.timeout(CALL_TIMEOUT_MS),
      redirect: "manual",
    });
    return { status: response.status, body: await response.json().catch(() => undefined) };
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null;
}

function parseDecision(body: unknown): SpendDecision | undefined {
  if (!isRecord(body)) return undefined;
  const b = body;
  const strings = ["decision_id", "payer", "network", "asset", "amount", "destination", "expires_at"];
  if (!strings.every((field) => typeof b[field] === "string")) return undefined;
  if (typeof b.approved !== "boolean" || !STATES.has(b.state as SpendDecision["state"])) return undefined;
  if (typeof b.credits !== "number" || !Number.isSafeInteger(b.credits) || b.credits < 1) return undefined;
  const expiresAt = new Date(b.expires_at as string);
  if (Number.isNaN(expiresAt.getTime()) || !/^(0|[1-9]\d*)$/.test(b.amount as string)) return undefined;
  return {
    decisionId: b.decision_id as string,
    payer: b.payer as string,
    approved: b.approved,
    reason: typeof b.reason === "string" ? b.reason : undefined,
    network: b.network as string,
    asset: b.asset as string,
    amount: b.amount as string,
    destination: b.destination as string,
    credits: b.credits,
    expiresAt,
    state: b.state as SpendDecision["state"],
  };
}

/**
 * The daemon's own "no such decision". A 404 of anything else (a gateway's, a URL without the daemon behind
 * it) says nothing of the decision.
 */
function isDecisionNotFound(status: number, body: unknown): boolean {
  return status === 404 && isRecord(body) && body.code === "decision_not_found";
}
