import {
  Mutex,
  messages,
  type PGlite,
  protocol,
  type QueryOptions,
  type Results,
  type Transaction,
  TransactionAbortedError,
} from "@electric-sql/pglite";

/** A statement the backend holds under a name, with what it takes and what it returns. */
interface Prepared {
  name: string;
  parameterTypes: number[];
  /** Its columns, as results name them (none for a statement that returns no rows); every result shares them. */
  fields: { name: string; dataTypeID: number }[];
}

/** The statements kept prepared at once, by default; the one used longest ago is closed to make room. */
const MAX_PREPARED = 200;

/**
 * PGlite's one connection, as drizzle's PGlite driver uses it (`query` and `transaction`), with each
 * statement's text parsed once and kept by name in the backend, as PostgreSQL drivers keep named statements
 * per connection (PostgreSQL still plans each run until it settles on a generic plan). PGlite's own `query`
 * parses, describes, binds, describes again and executes every call in six trips through its WASM backend;
 * here a statement seen before is one trip (Bind, Execute, Sync), about five times less CPU, on the thread
 * that also serves every request.
 *
 * Whoever holds the connection holds it whole: a statement for its run, a transaction from BEGIN to its end,
 * so no other caller's statement lands inside someone's transaction. One connection to a PGlite, and nothing
 * else uses that PGlite once it is made (the migrations run before): its locks are the connection's own.
 */
export class PgliteConnection implements PgliteDriverClient {
  readonly #pg: PGlite;
  readonly #owner = new Mutex();
  /**
   * One statement at a time inside the backend, a transaction's too (drizzle may run two at once): PGlite
   * gathers a statement's answer in state shared by all, so two interleaved would swap their answers.
   */
  readonly #inBackend = new Mutex();
  /** By SQL text, in order of last use (a Map keeps insertion order). */
  readonly #prepared = new Map<string, Prepared>();
  /** Names evicted and not yet closed: closed ahead of the next statement, in the same trip. */
  #toClose: string[] = [];
  #nextName = 0;
  readonly #maxPrepared: number;
  /** Set by `close`: what is asked for from then on is refused. */
  #closing = false;
  /** Why no statement may run any more: a transaction that could not be ended was left open. */
  #broken: Error | undefined;

  constructor(pg: PGlite, options: { maxPrepared?: number } = {}) {
    this.#pg = pg;
    this.#maxPrepared = Math.max(1, options.maxPrepared ?? MAX_PREPARED);
  }

  /** One statement on its own: its result, as PGlite's `query` answers it. */
  query<T>(text: string, params: unknown[] = [], options?: QueryOptions): Promise<Results<T>> {
    return this.#hold(async () => {
      try {
        return await this.#run<T>(text, params, options);
      } finally {
        await this.#pg.syncToFs();
      }
    });
  }

  /**
   * Closes PGlite once every statement and transaction already asked for has ended; anything asked for from
   * now on is refused.
   */
  async close(): Promise<void> {
    this.#closing = true;
    await this.#owner.runExclusive(async () => {
      if (!this.#pg.closed) await this.#pg.close();
    });
  }

  /** Runs `work` holding the whole connection, unless it can no longer be used. */
  #hold<T>(work: () => Promise<T>): Promise<T> {
    if (this.#closing) return Promise.reject(new Error("the store is closed"));
    return this.#owner.runExclusive(async () => {
      // Also for a caller that was waiting while the one ahead of it broke the connection.
      if (this.#broken) throw this.#broken;
      return work();
    });
  }

  /**
   * A transaction: `work` runs its statements through the handle it is given; COMMIT when it resolves,
   * ROLLBACK when it throws (its error is rethrown).
   */
  transaction<T>(work: (tx: PgliteTransactionHandle) => Promise<T>): Promise<T> {
    return this.#hold(async () => {
      let open = true;
      let rollbackFailure: unknown;
      const handle: PgliteTransactionHandle = {
        query: <R>(text: string, params?: unknown[], options?: QueryOptions) => {
          if (!open) return Promise.reject(new Error("the transaction has ended"));
          return this.#run<R>(text, params ?? [], options);
        },
      };
      await this.#simple("BEGIN");
      try {
        const result = await work(handle);
        open = false;
        // COMMIT of a transaction that a failed statement aborted rolls it back instead.
        if (commandOf(await this.#simple("COMMIT")) === "ROLLBACK") throw new TransactionAbortedError();
        return result;
      } catch (error) {
        if (open) {
          open = false;
          // The work's error is the one its caller sees, should the rollback fail too (kept below).
          await this.#simple("ROLLBACK").catch((failure: unknown) => {
            rollbackFailure = failure;
          });
        }
        throw error;
      } finally {
        // Still inside it (a COMMIT or ROLLBACK that failed): every later statement would run in it, and
        // the next COMMIT would commit what this caller was told had failed.
        if (!this.#pg.closed && this.#pg.isInTransaction())
          this.#broken ??= new Error("the store's connection was left inside a failed transaction", {
            cause: rollbackFailure,
          });
        await this.#pg.syncToFs();
      }
    });
  }

  /** A statement without parameters, by the simple protocol: its messages. */
  #simple(text: string): Promise<messages.BackendMessage[]> {
    return this.#inBackend.runExclusive(() => this.#exchange([protocol.serialize.query(text)]));
  }

  /** Hands the backend protocol messages, at once, and answers its replies (its error, thrown). */
  async #exchange(parts: Uint8Array[]): Promise<messages.BackendMessage[]> {
    // A closed PGlite's backend is gone: asked anyway, it can spin forever.
    if (this.#pg.closed) throw new Error("the store is closed");
    return (await this.#pg.execProtocol(Buffer.concat(parts), { syncToFs: false })).messages;
  }

  #run<T>(text: string, params: unknown[], options: QueryOptions | undefined): Promise<Results<T>> {
    return this.#inBackend.runExclusive(() => this.#runAlone<T>(text, params, options));
  }

  async #runAlone<T>(
    text: string,
    params: unknown[],
    options: QueryOptions | undefined,
  ): Promise<Results<T>> {
    const prepared = this.#prepared.get(text) ?? (await this.#prepare(text));
    // Most recently used last.
    this.#prepared.delete(text);
    this.#prepared.set(text, prepared);
    const values = params.map((value, index) => {
      if (value === null || value === undefined) return null;
      const type = prepared.parameterTypes[index] ?? 0;
      const serializer = options?.serializers?.[type] ?? this.#pg.serializers[type];
      return serializer ? serializer(value) : String(value);
    });
    const closing = this.#toClose.map((name) => protocol.serialize.close({ type: "S", name }));
    this.#toClose = [];
    let replies: messages.BackendMessage[];
    try {
      replies = await this.#exchange([
        ...closing,
        protocol.serialize.bind({ statement: prepared.name, values }),
        protocol.serialize.execute({}),
        protocol.serialize.sync(),
      ]);
    } catch (error) {
      // A plan whose result type a schema change altered, or a statement the backend no longer has: prepared
      // afresh on its next use.
      if (isDatabaseError(error) && (error.code === "0A000" || error.code === "26000")) this.#evict(text);
      throw error;
    }
    return this.#results<T>(prepared, replies, options);
  }

  /**
   * The statement's rows, parsed by their columns' types, as PGlite's `query` answers them. (PGlite's own
   * result parser copies its whole table of type parsers on every call that brings parsers of its own, as
   * drizzle's always does: most of a short statement's cost.)
   */
  #results<T>(
    prepared: Prepared,
    replies: messages.BackendMessage[],
    options: QueryOptions | undefined,
  ): Results<T> {
    const { fields } = prepared;
    const parsers = fields.map(
      ({ dataTypeID }) => options?.parsers?.[dataTypeID] ?? this.#pg.parsers[dataTypeID],
    );
    const asArrays = options?.rowMode === "array";
    const rows: unknown[] = [];
    const result: Results<T> = { rows: rows as Results<T>["rows"], fields, affectedRows: 0 };
    for (const reply of replies) {
      if (reply instanceof messages.DataRowMessage) {
        const values = reply.fields.map((value, index) => {
          const parser = parsers[index];
          return value === null || !parser ? value : parser(value, fields[index]?.dataTypeID ?? 0);
        });
        rows.push(
          asArrays ? values : Object.fromEntries(fields.map(({ name }, index) => [name, values[index]])),
        );
      } else if (reply instanceof messages.CommandCompleteMessage) {
        // `INSERT 0 2`, `UPDATE 3`, `SELECT 1`, `BEGIN`: the command, and the rows it counted when it counts.
        const [command = "", ...rest] = reply.text.split(" ");
        const counted = Number.parseInt(rest[rest.length - 1] ?? "", 10);
        result.command = command;
        if (!Number.isNaN(counted)) result.rowCount = counted;
        if (["INSERT", "UPDATE", "DELETE", "COPY", "MERGE"].includes(command)) result.affectedRows = counted;
      }
    }
    return result;
  }

  async #prepare(text: string): Promise<Prepared> {
    const name = `svc_${this.#nextName++}`;
    const replies = await this.#exchange([
      protocol.serialize.parse({ name, text }),
      protocol.serialize.describe({ type: "S", name }),
      protocol.serialize.sync(),
    ]);
    const prepared: Prepared = { name, parameterTypes: [], fields: [] };
    for (const message of replies) {
      if (message instanceof messages.ParameterDescriptionMessage)
        prepared.parameterTypes = message.dataTypeIDs;
      if (message instanceof messages.RowDescriptionMessage)
        prepared.fields = message.fields.map(({ name, dataTypeID }) => ({ name, dataTypeID }));
    }
    this.#prepared.set(text, prepared);
    while (this.#prepared.size > this.#maxPrepared) {
      const [oldest] = this.#prepared.keys();
      if (oldest === undefined) break;
      this.#evict(oldest);
    }
    return prepared;
  }

  #evict(text: string): void {
    const prepared = this.#prepared.get(text);
    if (!prepared) return;
    this.#prepared.delete(text);
    this.#toClose.push(prepared.name);
  }
}

/** What a transaction's statements run through: the part of PGlite's `Transaction` drizzle uses. */
export type PgliteTransactionHandle = Pick<Transaction, "query">;

/**
 * The part of PGlite that drizzle's PGlite driver uses, which {@link PgliteConnection} answers: a whole
 * PGlite fits it too, so a connection checked against it can be handed to the driver as one.
 */
export interface PgliteDriverClient extends Pick<PGlite, "query"> {
  transaction<T>(work: (tx: PgliteTransactionHandle) => Promise<T>): Promise<T>;
}

/** The command tag's first word (`COMMIT`, `ROLLBACK`, `INSERT`…) of a statement's messages. */
function commandOf(replies: messages.BackendMessage[]): string | undefined {
  for (const message of replies)
    if (message instanceof messages.CommandCompleteMessage) return message.text.split(" ")[0];
  return undefined;
}

function isDatabaseError(error: unknown): error is messages.DatabaseError {
  return error instanceof messages.DatabaseError;
}
