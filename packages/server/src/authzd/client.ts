import { errors } from "../internal/errors.ts";

/** A spend decision as the authorization daemon reports it (`GET /spend/decisions/:id`). */
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
  expiresAt: Date;
  state: "approved" | "denied" | "settled" | "cancelled" | "expired";
}

const STATES = new Set<SpendDecision["state"]>(["approved", "denied", "settled", "cancelled", "expired"]);
const LOOKUP_TIMEOUT_MS = 5_000;

/**
 * Talks to the authorization daemon as the service's own identity (capability `wallet.spend.verify`).
 * The service only reads decisions; it never authorizes or settles for a client (api.md).
 * @example
 * const daemon = new AuthzdClient({ url: "http://127.0.0.1:8421", token: "azd_…" });
 * const decision = await daemon.lookupDecision("dec_…"); // undefined when the daemon does not know it
 */
export class AuthzdClient {
  readonly #url: string;
  readonly #token: string;

  constructor(config: { url: string; token: string }) {
    this.#url = config.url;
    this.#token = config.token;
  }

  /**
   * The decision with this id, or undefined when the daemon knows none. Any other answer (unreachable,
   * refused, malformed) is `authzd_unavailable`: a spend is never admitted on a decision not read.
   */
  async lookupDecision(decisionId: string): Promise<SpendDecision | undefined> {
    let response: Response;
    let body: unknown;
    try {
      response = await fetch(`${this.#url}/spend/decisions/${encodeURIComponent(decisionId)}`, {
        headers: { authorization: `Bearer ${this.#token}` },
        signal: AbortSignal.timeout(LOOKUP_TIMEOUT_MS),
      });
      body = await response.json().catch(() => undefined);
    } catch (error) {
      throw errors.authzdUnavailable(error);
    }
    if (response.status === 404) return undefined;
    if (response.status !== 200)
      throw errors.authzdUnavailable(new Error(`decision lookup answered ${response.status}`));
    const decision = parseDecision(body);
    if (!decision) throw errors.authzdUnavailable(new Error("decision lookup answered a malformed body"));
    return decision;
  }
}

function parseDecision(body: unknown): SpendDecision | undefined {
  if (typeof body !== "object" || body === null) return undefined;
  const b = body as Record<string, unknown>;
  const strings = ["decision_id", "payer", "network", "asset", "amount", "destination", "expires_at"];
  if (!strings.every((field) => typeof b[field] === "string")) return undefined;
  if (typeof b.approved !== "boolean" || !STATES.has(b.state as SpendDecision["state"])) return undefined;
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
    expiresAt,
    state: b.state as SpendDecision["state"],
  };
}
