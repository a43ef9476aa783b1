/** The kinds of chain the service holds keys for. One EVM address serves every EVM chain. */
export type ChainKind = "evm" | "solana";

/** What the rest of the service needs to know about a chain it serves. */
export interface ChainInfo {
  name: string;
  kind: ChainKind;
}

/** The chains this deployment serves, by their stable API names. */
export class ChainRegistry {
  readonly #chains: Map<string, ChainInfo>;

  constructor(chains: readonly ChainInfo[]) {
    this.#chains = new Map(chains.map((chain) => [chain.name, chain]));
  }

  /** @example registry.get("base")?.kind // "evm" */
  get(name: string): ChainInfo | undefined {
    return this.#chains.get(name);
  }

  names(): string[] {
    return [...this.#chains.keys()];
  }
}

/** The chain names served before the chain layer lands: the stable API words of api.md. */
export const DEFAULT_CHAINS: readonly ChainInfo[] = [
  { name: "base", kind: "evm" },
  { name: "ethereum", kind: "evm" },
  { name: "arbitrum", kind: "evm" },
  { name: "solana", kind: "solana" },
];
