import type { FailedSettlementRecord, FailedSettlementStore } from "./types.ts";

/**
 * The default failed-settlement store: records in this process's memory, lost when it exits. For a store
 * that survives a restart, use `FileSettlementStore` from `@svc/sdk/node` (or your own
 * {@link FailedSettlementStore}).
 * @example
 * const shared = new MemorySettlementStore();
 * const a = new SvcWallet({ apiKey, authz: { gatewayUrl, token, settlementStore: shared } });
 */
export class MemorySettlementStore implements FailedSettlementStore {
  readonly #records = new Map<string, FailedSettlementRecord>();

  list(): FailedSettlementRecord[] {
    return [...this.#records.values()].map((record) => structuredClone(record));
  }

  put(record: FailedSettlementRecord): void {
    // Re-inserting moves the record to the end: the list stays in order of the latest failure.
    this.#records.delete(record.decisionId);
    this.#records.set(record.decisionId, structuredClone(record));
  }

  remove(decisionId: string): void {
    this.#records.delete(decisionId);
  }
}
