/**
 * Reading x402 challenges (HTTP 402) and choosing what to pay. v1 challenges are JSON bodies; v2 challenges
 * are the `PAYMENT-REQUIRED` header (the body may be `{}`). Parsing is lenient where the protocol is loose
 * (missing descriptions, `extra: null`, unknown error strings, schemes we do not pay are skipped) and strict
 * on what decides where money goes: amount, payee, asset and network.
 */
import { isAddress as isSolanaAddress } from "@solana/kit";
import { isAddress as isEvmAddress } from "viem";
import { lostAt, sameAddress } from "../chains/addresses.ts";
import type { ChainConfig, TokenInfo } from "../chains/types.ts";
import { errors } from "../internal/errors.ts";
import { formatUnits, parseUnitsStrict } from "../internal/money.ts";
import { decodeHeaderJson, isJsonObject, MAX_JSON_DEPTH, nestsDeeperThan } from "./encoding.ts";
import { toCaip2 } from "./networks.ts";

/** The v2 challenge header. */
export const PAYMENT_REQUIRED_HEADER = "payment-required";

/** One way to pay that a challenge offers, read and checked; `raw` is the entry exactly as the server sent it. */
export interface PaymentRequirement {
  scheme: "exact";
  /** The network as the server named it: a v1 name or a CAIP-2 id. */
  network: string;
  /** Its CAIP-2 id. */
  caip2: string;
  /** Atomic units of `asset` (v1 `maxAmountRequired`, v2 `amount`). */
  amount: bigint;
  /** Token contract (EVM) or mint (Solana), as sent. */
  asset: string;
  /** The payee, as sent. */
  payTo: string;
  /** How long the server waits for a payment; 60 when the server did not say. */
  maxTimeoutSeconds: number;
  /** Scheme facts: EVM `{ name, version }` (the token's EIP-712 domain), Solana `{ feePayer, memo? }`. */
  extra: Record<string, unknown>;
  /** The `accepts` entry verbatim: v2 payments echo it as `accepted`, and servers compare it deeply. */
  raw: Readonly<Record<string, unknown>>;
}

/** An `accepts` entry that cannot be paid as sent, and why. */
export interface SkippedRequirement {
  index: number;
  reason: string;
}

/** A 402's challenge. */
export interface PaymentChallenge {
  version: 1 | 2;
  /** The server's `error` string, if any (free text; not a closed list). */
  error: string | undefined;
  /** v2 `resource` object verbatim (`{ url, description?, mimeType? }`); echoed in the payment. */
  resource: Readonly<Record<string, unknown>> | undefined;
  /** v2 `extensions` verbatim; echoed in the payment. */
  extensions: Readonly<Record<string, unknown>> | undefined;
  /** The entries that can be paid as far as the challenge alone tells, in the server's order. */
  requirements: PaymentRequirement[];
  skipped: SkippedRequirement[];
}

/** What a 402 response gave: its headers and body bytes. */
export interface ChallengeResponse {
  headers: Headers;
  body: Uint8Array | string;
}

const DEFAULT_MAX_TIMEOUT_SECONDS = 60;
/** Entries of `accepts` read; a server offers a handful, and what is refused is echoed in the error. */
const MAX_ACCEPTS_READ = 32;
/** Server-given strings echoed in a refusal are cut to this length. */
const ECHOED_CHARS = 64;
const UINT256_MAX = (1n << 256n) - 1n;
const ATOMIC_AMOUNT = /^[1-9]\d{0,77}$/;

/**
 * Reads the challenge of a 402: the `PAYMENT-REQUIRED` header when present (v2), else the JSON body (v1,
 * or a v2 document in the body). Throws 502 `invalid_payment_challenge` when there is none to read.
 *
 * @example
 * ```ts
 * const challenge = parsePaymentChallenge({ headers: response.headers, body: response.body });
 * challenge.version;                 // 2
 * challenge.requirements[0]?.amount; // 10000n
 * ```
 */
export function parsePaymentChallenge(response: ChallengeResponse): PaymentChallenge {
  const header = response.headers.get(PAYMENT_REQUIRED_HEADER);
  if (header !== null) {
    const document = decodeHeaderJson(header);
    refuseTooDeep(document);
    if (!isJsonObject(document)) {
      throw errors.invalidPaymentChallenge(
        "The 402's PAYMENT-REQUIRED header is not base64 of a JSON object",
      );
    }
    if (document.x402Version !== 2) {
      throw errors.invalidPaymentChallenge(
        `The 402's PAYMENT-REQUIRED header has x402Version ${JSON.stringify(document.x402Version)}, not 2`,
      );
    }
    return readChallenge(2, document);
  }
  const text =
    typeof response.body === "string" ? response.body : Buffer.from(response.body).toString("utf8");
  let document: unknown;
  try {
    document = JSON.parse(text);
  } catch {
    throw errors.invalidPaymentChallenge(
      "The 402 carries no x402 challenge: no PAYMENT-REQUIRED header and the body is not JSON",
    );
  }
  refuseTooDeep(document);
  if (!isJsonObject(document) || (document.x402Version !== 1 && document.x402Version !== 2)) {
    throw errors.invalidPaymentChallenge(
      "The 402 carries no x402 challenge: no PAYMENT-REQUIRED header and the body has no x402Version 1 or 2",
    );
  }
  return readChallenge(document.x402Version, document);
}

/** A challenge nested past any real one is refused before anything re-encodes a part of it. */
function refuseTooDeep(document: unknown): void {
  if (nestsDeeperThan(document, MAX_JSON_DEPTH))
    throw errors.invalidPaymentChallenge(
      `The 402's x402 challenge nests deeper than ${MAX_JSON_DEPTH} levels`,
    );
}

function readChallenge(version: 1 | 2, document: Record<string, unknown>): PaymentChallenge {
  if (!Array.isArray(document.accepts)) {
    throw errors.invalidPaymentChallenge(`The x402 v${version} challenge has no accepts list`);
  }
  const requirements: PaymentRequirement[] = [];
  const skipped: SkippedRequirement[] = [];
  document.accepts.slice(0, MAX_ACCEPTS_READ).forEach((entry: unknown, index) => {
    const read = readRequirement(version, entry);
    if (typeof read === "string") skipped.push({ index, reason: read });
    else requirements.push(read);
  });
  if (document.accepts.length > MAX_ACCEPTS_READ) {
    skipped.push({
      index: MAX_ACCEPTS_READ,
      reason: `the entries after the first ${MAX_ACCEPTS_READ} are not read (${document.accepts.length - MAX_ACCEPTS_READ} more)`,
    });
  }
  return {
    version,
    error: typeof document.error === "string" ? document.error : undefined,
    resource: version === 2 && isJsonObject(document.resource) ? document.resource : undefined,
    extensions: version === 2 && isJsonObject(document.extensions) ? document.extensions : undefined,
    requirements,
    skipped,
  };
}

/** A checked requirement, or why the entry cannot be paid. */
function readRequirement(version: 1 | 2, entry: unknown): PaymentRequirement | string {
  if (!isJsonObject(entry)) return "not an object";
  if (entry.scheme !== "exact") return `scheme ${JSON.stringify(entry.scheme)} is not paid (only "exact")`;
  if (typeof entry.network !== "string") return "no network";
  const caip2 = toCaip2(entry.network);
  if (caip2 === undefined) return `unknown network ${JSON.stringify(entry.network.slice(0, 64))}`;
  const amountField = version === 1 ? "maxAmountRequired" : "amount";
  const amountText = entry[amountField];
  // A JSON number could already have lost digits: amounts are decimal strings of atomic units.
  if (typeof amountText !== "string" || !ATOMIC_AMOUNT.test(amountText) || BigInt(amountText) > UINT256_MAX) {
    return `${amountField} must be a positive integer of atomic units as a string`;
  }
  if (typeof entry.payTo !== "string" || entry.payTo === "") return "no payTo";
  if (typeof entry.asset !== "string" || entry.asset === "") return "no asset";
  const timeout = Number(entry.maxTimeoutSeconds);
  return {
    scheme: "exact",
    network: entry.network,
    caip2,
    amount: BigInt(amountText),
    asset: entry.asset,
    payTo: entry.payTo,
    maxTimeoutSeconds: Number.isSafeInteger(timeout) && timeout > 0 ? timeout : DEFAULT_MAX_TIMEOUT_SECONDS,
    extra: isJsonObject(entry.extra) ? entry.extra : {},
    raw: entry,
  };
}

/** What a caller allows a payment to be. */
export interface PaymentConstraints {
  /** The chains the paying wallet holds, as configured (their `network` is matched). */
  chains: readonly ChainConfig[];
  /** Only this chain (a registry name, e.g. `base`), when the caller says. */
  chain?: string;
  /** At most this much of the token, in whole tokens as a decimal string (e.g. `"0.05"`), when the caller says. */
  maxAmount?: string;
}

/** The requirement to pay, with the chain and token it is paid on. */
export interface SelectedRequirement {
  requirement: PaymentRequirement;
  chain: ChainConfig;
  token: TokenInfo;
}

/**
 * Chooses the first requirement (the server's order is its preference) that the wallet can pay: a network
 * among its chains (and the caller's `chain`, if given), an asset the chain serves, a well-formed payee that
 * is not the zero address, the scheme facts present (EVM `extra.name`/`extra.version`, Solana
 * `extra.feePayer`), and an amount within `maxAmount`. Throws 400 `max_amount_exceeded` when only the
 * amount stood in the way, else 400 `no_payable_requirement`, with each entry's reason in `details`.
 *
 * @example
 * ```ts
 * const { requirement, chain, token } = selectRequirement(challenge, { chains: walletChains, maxAmount: "0.05" });
 * chain.name;            // "base"
 * requirement.amount;    // 10000n
 * ```
 */
export function selectRequirement(
  challenge: PaymentChallenge,
  constraints: PaymentConstraints,
): SelectedRequirement {
  const refusals: { network: string; asset: string; amount: string; reason: string }[] = [];
  let overMaxOnly = 0;
  for (const requirement of challenge.requirements) {
    const refuse = (reason: string) =>
      refusals.push({
        network: requirement.network,
        asset: requirement.asset.slice(0, ECHOED_CHARS),
        amount: requirement.amount.toString(),
        reason,
      });
    const chain = constraints.chains.find((c) => c.network === requirement.caip2);
    if (!chain) {
      refuse(`network ${requirement.network} is not one of this wallet's chains`);
      continue;
    }
    if (constraints.chain !== undefined && chain.name !== constraints.chain) {
      refuse(`network ${requirement.network} is ${chain.name}, not ${constraints.chain}`);
      continue;
    }
    if (chain.kind === "evm" && !isEvmAddress(requirement.asset, { strict: false })) {
      refuse(`asset ${requirement.asset.slice(0, ECHOED_CHARS)} is not an EVM address`);
      continue;
    }
    const token = chain.tokens.find(
      (t) => t.address !== null && sameAddress(chain.kind, t.address, requirement.asset),
    );
    if (!token) {
      refuse(
        `asset ${requirement.asset.slice(0, ECHOED_CHARS)} is not a token this service pays on ${chain.name}`,
      );
      continue;
    }
    const problem = payeeProblem(chain, requirement.payTo) ?? extraProblem(chain, requirement.extra);
    if (problem) {
      refuse(problem);
      continue;
    }
    if (
      constraints.maxAmount !== undefined &&
      !withinMax(requirement.amount, token.decimals, constraints.maxAmount)
    ) {
      refuse(
        `${formatUnits(requirement.amount, token.decimals)} ${token.symbol} is over maxAmount ${constraints.maxAmount}`,
      );
      overMaxOnly += 1;
      continue;
    }
    return { requirement, chain, token };
  }
  const details = {
    walletChains: constraints.chains.map((c) => c.name),
    ...(constraints.chain === undefined ? {} : { chain: constraints.chain }),
    ...(constraints.maxAmount === undefined ? {} : { maxAmount: constraints.maxAmount }),
    refused: refusals,
    skipped: challenge.skipped,
  };
  if (overMaxOnly > 0 && overMaxOnly === refusals.length) {
    throw errors.noPayableRequirement(
      "max_amount_exceeded",
      `Every payment the resource accepts is over maxAmount ${constraints.maxAmount}`,
      details,
    );
  }
  const offered = challenge.requirements.map((r) => r.network);
  throw errors.noPayableRequirement(
    "no_payable_requirement",
    offered.length === 0
      ? "The resource offers no payment this service can make (only the exact scheme is paid)"
      : `The resource accepts payment on ${[...new Set(offered)].join(", ")}; none can be paid from this wallet`,
    details,
  );
}

function payeeProblem(chain: ChainConfig, payTo: string): string | undefined {
  if (chain.kind === "evm" && !isEvmAddress(payTo, { strict: false }))
    return `payTo ${payTo.slice(0, 64)} is not an EVM address`;
  if (chain.kind === "solana" && !isSolanaAddress(payTo))
    return `payTo ${payTo.slice(0, 64)} is not a Solana address`;
  const lost = lostAt(chain, payTo);
  return lost && `payTo is ${lost}, not a recipient`;
}

function extraProblem(chain: ChainConfig, extra: Record<string, unknown>): string | undefined {
  if (chain.kind === "evm") {
    // The EIP-712 domain is the token's; only the challenge says which name and version it signs under.
    if (typeof extra.name !== "string" || extra.name === "" || typeof extra.version !== "string") {
      return "extra.name and extra.version (the token's EIP-712 domain) are missing";
    }
    return undefined;
  }
  if (typeof extra.feePayer !== "string" || !isSolanaAddress(extra.feePayer)) {
    return "extra.feePayer (the facilitator's fee payer) is missing or not a Solana address";
  }
  return undefined;
}

/** `amount` atomic units of a token with `decimals` is at most `max` whole tokens. */
function withinMax(amount: bigint, decimals: number, max: string): boolean {
  const scale = Math.max(decimals, 18);
  const maxScaled = parseUnitsStrict(max, scale);
  if (maxScaled === undefined) {
    throw errors.invalidAmount(`maxAmount must be a decimal amount of the token, not ${JSON.stringify(max)}`);
  }
  return amount * 10n ** BigInt(scale - decimals) <= maxScaled;
}
