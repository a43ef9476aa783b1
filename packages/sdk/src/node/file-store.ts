import fs from "node:fs";
import path from "node:path";
import type { FailedSettlementRecord, FailedSettlementStore } from "../authz/types.ts";

/**
 * A failed-settlement store in a JSON file, so an agent process that crashes after paying can settle after a
 * restart (`svc.authz.retryLatestFailedSettlement()`). Every change rewrites the file atomically (a synced
 * temporary file renamed over it), so a crash leaves the old or the new list, never a torn one. One process
 * per file: two processes writing the same file would overwrite each other's records.
 * @example
 * import { SvcWallet } from "@svc/sdk";
 * import { FileSettlementStore } from "@svc/sdk/node";
 *
 * const svc = new SvcWallet({
 *   apiKey,
 *   authz: { gatewayUrl, token, settlementStore: new FileSettlementStore("./.svc/failed-settlements.json") },
 * });
 */
export class FileSettlementStore implements FailedSettlementStore {
  readonly file: string;
  readonly #records = new Map<string, FailedSettlementRecord>();

  /**
   * Opens (or starts) the store at `file`; a file that is not a list of records throws.
   * @example
   * const store = new FileSettlementStore("./.svc/failed-settlements.json");
   */
  constructor(file: string) {
    this.file = path.resolve(file);
    let text: string | undefined;
    try {
      text = fs.readFileSync(this.file, "utf8");
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
    }
    if (text !== undefined && text.trim() !== "") {
      const parsed: unknown = JSON.parse(text);
      if (!Array.isArray(parsed)) throw new Error(`${this.file} does not hold a list of failed settlements`);
      for (const record of parsed as FailedSettlementRecord[]) {
        if (typeof record?.decisionId !== "string")
          throw new Error(`${this.file} holds a record without decisionId`);
        this.#records.set(record.decisionId, record);
      }
    }
  }

  list(): FailedSettlementRecord[] {
    return [...this.#records.values()].map((record) => structuredClone(record));
  }

  put(record: FailedSettlementRecord): void {
    this.#records.delete(record.decisionId);
    this.#records.set(record.decisionId, structuredClone(record));
    this.#write();
  }

  remove(decisionId: string): void {
    if (this.#records.delete(decisionId)) this.#write();
  }

  #write(): void {
    fs.mkdirSync(path.dirname(this.file), { recursive: true, mode: 0o700 });
    const temporary = `${this.file}.${process.pid}.tmp`;
    const fd = fs.openSync(temporary, "w", 0o600);
    try {
      fs.writeSync(fd, `${JSON.stringify([...this.#records.values()], null, 2)}\n`);
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(temporary, this.file);
  }
}
