import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { PGlite } from "@electric-sql/pglite";
import { getTableColumns, type SQL, sql } from "drizzle-orm";
import { drizzle as drizzleNodePg } from "drizzle-orm/node-postgres";
import type { AnyPgColumn, PgDatabase, PgQueryResultHKT, PgTable } from "drizzle-orm/pg-core";
import { drizzle as drizzlePglite } from "drizzle-orm/pglite";
import pg from "pg";
import { ensurePrivateDir, restrictTree } from "../private-files.ts";
import { PgliteConnection, type PgliteDriverClient } from "./pglite-connection.ts";
import * as schema from "./schema.ts";

/** The drizzle database, whichever driver is underneath. */
export type Db = PgDatabase<PgQueryResultHKT, typeof schema>;

/** An open database transaction; every named query takes `Db | Tx`, so it runs alone or inside one. */
export type Tx = Parameters<Parameters<Db["transaction"]>[0]>[0];

/** An open store: the database, which engine it is, and how to close it. */
export interface Store {
  db: Db;
  kind: "pglite" | "postgres";
  /** Resolves when the store answers a trivial query. */
  ping(): Promise<void>;
  /**
   * Claims the store for the chains this instance serves, until it closes; false when refused. `own`: local
   * chains of its own, started anew under names the store may know of other chains by, so no other running
   * instance may serve chains from the store (whatever they are). Otherwise chains shared with the instances
   * beside it, refused only while one serves chains of its own. On PostgreSQL a session's advisory lock,
   * exclusive or shared (several instances may share one database); an embedded store is one process's
   * already (its data directory's lock).
   *
   * The lock lives as long as its connection: one cut (the server restarted, a proxy timing it out) is
   * replaced and the lock taken again, retried each second while the database cannot be reached. Taken
   * meanwhile by another instance, the claim is lost: `onLost` is told, once, and nothing is retried.
   */
  claimForChains(own: boolean, onLost: (error: ClaimLostError) => void): Promise<boolean>;
  /** Whether other instances run on the store now (they hold its claim, {@link claimForChains}). */
  othersRunning(): Promise<boolean>;
  close(): Promise<void>;
}

/**
 * Where the store lives: a PostgreSQL URL, a PGlite data directory, or PGlite in memory (tests). In memory,
 * `initializedFrom` is a dump (PGlite's `dumpDataDir`) of a data directory PGlite has initialized, to start
 * from instead of initializing one, which takes seconds: the tests start each of their stores from one.
 */
export type StoreLocation =
  | { databaseUrl: string }
  | { pgliteDir: string }
  | { pgliteMemory: true; initializedFrom?: Blob };

/**
 * The advisory lock an instance holds on a PostgreSQL store for the chains it serves: exclusive when they are
 * local chains of its own, shared otherwise.
 */
export const CHAINS_CLAIM_LOCK = 727_276;

/** How long a claim whose connection was cut waits between attempts to take its lock again. */
const RECLAIM_EVERY_MS = 1_000;

/** The store's claim for an instance's chains, lost while it ran: another instance took it. */
export class ClaimLostError extends Error {
  constructor() {
    super(
      "another instance claimed this database's chains while its connection to PostgreSQL was cut: this instance stopped, since two instances serving chains of one name from one database end each other's spends",
    );
    this.name = "ClaimLostError";
  }
}

const migrationsDir = fileURLToPath(new URL("./migrations/", import.meta.url));

/**
 * Opens the store and applies any migrations it lacks.
 * @example
 * const store = await openStore({ pgliteDir: "./.svc-data/pg" });
 */
export async function openStore(location: StoreLocation): Promise<Store> {
  if ("databaseUrl" in location) {
    // TCP keep-alive: the chains' claim idles on its connection for the instance's life, and a NAT or
    // firewall dropping idle flows would cut it unseen.
    const pool = new pg.Pool({ connectionString: location.databaseUrl, max: 10, keepAlive: true });
    // A client that loses its connection emits 'error': the pool listens on the idle ones, and no one on a
    // client checked out (a transaction's), where an unheard 'error' would end the process. The query in
    // flight fails on its own; the next checkout reconnects.
    pool.on("error", () => {});
    pool.on("connect", (client) => client.on("error", () => {}));
    await migrate({
      withLock: async (work) => {
        const client = await pool.connect();
        try {
          await client.query("SELECT pg_advisory_lock(727274)");
          return await work((text) => client.query(text).then(() => undefined));
        } finally {
          await client.query("SELECT pg_advisory_unlock(727274)").catch(() => {});
          client.release();
        }
      },
      appliedVersions: async () =>
        (await pool.query<{ version: number }>("SELECT version FROM schema_migrations")).rows,
    });
    const db: Db = drizzleNodePg(pool, { schema });
    let claim: pg.PoolClient | undefined;
    let closed = false;
    /** Takes the lock on a connection of its own, kept until the store closes; undefined when refused. */
    const takeLock = async (own: boolean): Promise<pg.PoolClient | undefined> => {
      const client = await pool.connect();
      const lock = own ? "pg_try_advisory_lock" : "pg_try_advisory_lock_shared";
      try {
        const { rows } = await client.query<{ claimed: boolean }>(
          `SELECT ${lock}(${CHAINS_CLAIM_LOCK}) AS claimed`,
        );
        if (rows[0]?.claimed) return client;
      } catch (error) {
        client.release(true);
        throw error;
      }
      client.release();
      return undefined;
    };
    /** Keeps the claim across its connection being cut, until the store closes or another takes it. */
    const holdClaim = (client: pg.PoolClient, own: boolean, onLost: (error: ClaimLostError) => void) => {
      claim = client;
      let cut = false;
      const reclaim = async () => {
        if (cut || closed) return;
        cut = true;
        client.release(true);
        claim = undefined;
        while (!closed) {
          const next = await takeLock(own).catch(() => "unreachable" as const);
          if (next === undefined) return onLost(new ClaimLostError());
          if (next !== "unreachable") {
            if (closed) next.release(true);
            else holdClaim(next, own, onLost);
            return;
          }
          await new Promise((resolve) => setTimeout(resolve, RECLAIM_EVERY_MS).unref());
        }
      };
      client.on("error", () => void reclaim());
      client.on("end", () => void reclaim());
    };
    return {
      db,
      kind: "postgres",
      ping: async () => {
        await pool.query("SELECT 1");
      },
      othersRunning: async () => {
        if (claim) throw new Error("othersRunning is asked before this instance claims the store");
        const alone = await takeLock(true);
        alone?.release(true);
        return alone === undefined;
      },
      claimForChains: async (own, onLost) => {
        if (claim) return true;
        const client = await takeLock(own);
        if (client) holdClaim(client, own, onLost);
        return client !== undefined;
      },
      close: async () => {
        closed = true;
        // The claim's connection ends with its session, and the lock with it.
        claim?.release(true);
        await pool.end();
      },
    };
  }

  let client: PGlite;
  if ("pgliteDir" in location) {
    ensurePrivateDir(location.pgliteDir);
    client = await PGlite.create(location.pgliteDir);
    // The database files hold every account's data: owner only, as PostgreSQL itself keeps its data dir.
    restrictTree(location.pgliteDir);
  } else {
    client = await PGlite.create(location.initializedFrom ? { loadDataDir: location.initializedFrom } : {});
  }
  await migrate({
    // PGlite has one connection and one process: nothing else can migrate beside us.
    withLock: (work) => work(async (text) => void (await client.exec(text))),
    appliedVersions: async () =>
      (await client.query<{ version: number }>("SELECT version FROM schema_migrations")).rows,
  });
  const connection = new PgliteConnection(client);
  // drizzle's PGlite driver calls only `query` and `transaction`, which the connection answers as PGlite
  // does (checked here); its type asks for a whole PGlite.
  const driverClient: PgliteDriverClient = connection;
  const db: Db = drizzlePglite(driverClient as PGlite, { schema });
  return {
    db,
    kind: "pglite",
    ping: async () => {
      await db.execute(sql`SELECT 1`);
    },
    claimForChains: async () => true,
    // The data directory's lock keeps any other out.
    othersRunning: async () => false,
    close: () => connection.close(),
  };
}

interface MigrationDriver {
  withLock<T>(work: (exec: (text: string) => Promise<void>) => Promise<T>): Promise<T>;
  appliedVersions(): Promise<{ version: number }[]>;
}

/** Applies the numbered SQL files in `migrations/` that are not yet recorded, each in its own transaction. */
async function migrate(driver: MigrationDriver): Promise<void> {
  const files = readdirSync(migrationsDir)
    .filter((file) => /^\d{4}_.+\.sql$/.test(file))
    .sort();
  await driver.withLock(async (exec) => {
    await exec(
      "CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())",
    );
    const applied = new Set((await driver.appliedVersions()).map((row) => Number(row.version)));
    for (const file of files) {
      const version = Number(file.slice(0, 4));
      if (applied.has(version)) continue;
      const body = readFileSync(join(migrationsDir, file), "utf8");
      const name = file.replace(/'/g, "''");
      await exec(
        `BEGIN;\n${body}\nINSERT INTO schema_migrations (version, name) VALUES (${version}, '${name}');\nCOMMIT;`,
      );
    }
  });
}

/** PostgreSQL's unique_violation constraint name, when the error (or one it wraps) is one. */
function uniqueViolationOf(error: unknown): string | undefined {
  for (let e: unknown = error, depth = 0; e && depth < 5; depth++) {
    if (typeof e === "object" && "code" in e && e.code === "23505") {
      return "constraint" in e && typeof e.constraint === "string" ? e.constraint : "";
    }
    e = typeof e === "object" && "cause" in e ? e.cause : undefined;
  }
  return undefined;
}

/**
 * Runs a storage step, turning the driver's unique violation of a named constraint (the index that decided a
 * race) into the domain error it means: the one place driver errors become domain errors.
 * @example await withDomainErrors(() => db.insert(accounts).values(row), { accounts_email_key: () => errors.emailTaken() });
 */
export async function withDomainErrors<T>(
  work: () => Promise<T>,
  onUniqueViolation: Record<string, () => Error>,
): Promise<T> {
  try {
    return await work();
  } catch (error) {
    const constraint = uniqueViolationOf(error);
    const domain = constraint === undefined ? undefined : onUniqueViolation[constraint];
    throw domain ? domain() : error;
  }
}

/**
 * Runs reads that must agree (a figure and the parts it sums) on one snapshot of the database, read-only: on
 * PostgreSQL each statement outside a transaction, or on another pooled connection, may see other commits.
 * @example const [policy, spending] = await readSnapshot(db, (tx) => Promise.all([getPolicyRow(tx, id), windowSpending(tx, id)]));
 */
export function readSnapshot<T>(db: Db, read: (tx: Tx) => Promise<T>): Promise<T> {
  return db.transaction(read, { isolationLevel: "repeatable read", accessMode: "read only" });
}

/** The first key of {@link holdCredential}'s advisory locks, apart from every other use of them. */
const CREDENTIAL_LOCKS = 727_275;

/**
 * Holds a credential (an API key's id; an account's id for its login tokens) until the transaction `tx`
 * ends (outside one it holds nothing):
 * `shared` by each spend it asks for, `exclusive` by its revocation or logout. PostgreSQL queues a shared
 * request behind an exclusive one already waiting, so a stream of spends cannot hold a revocation off. A
 * row lock would not do: a new `FOR SHARE` is granted beside the others however long an update has waited
 * (a key kept spending for 30 s after its revocation was asked). Read the credential after holding it.
 * @example await holdCredential(tx, keyId, "exclusive");
 */
export async function holdCredential(tx: Db | Tx, id: string, mode: "shared" | "exclusive"): Promise<void> {
  await tx.execute(
    mode === "shared"
      ? sql`SELECT pg_advisory_xact_lock_shared(${CREDENTIAL_LOCKS}, hashtext(${id}))`
      : sql`SELECT pg_advisory_xact_lock(${CREDENTIAL_LOCKS}, hashtext(${id}))`,
  );
}

/** Rows of a raw SQL query, whichever driver is underneath (both answer `{ rows }`). */
export async function selectRows<T>(db: Db | Tx, query: SQL): Promise<T[]> {
  const result: unknown = await db.execute(query);
  if (typeof result !== "object" || result === null || !("rows" in result) || !Array.isArray(result.rows))
    throw new Error("the database driver answered without rows");
  return result.rows as T[];
}

/** Where a column of a {@link namedStatement}'s rows lands in the row it returns: a path of keys. */
export type RowField = readonly [path: readonly string[], column: AnyPgColumn];

/**
 * A statement written once as SQL text with numbered parameters ($1, $2…), for the hot paths of a spend: run
 * by name (each PostgreSQL connection parses and plans it once) and without drizzle's query building, alone
 * or inside a transaction. `fields` say what each column the statement selects or returns is, in its order,
 * and its rows come back mapped as drizzle maps them (`[["policy", "dailyLimitMicros"], column]` is
 * `row.policy.dailyLimitMicros`, a bigint); without `fields` it returns no rows. Parameters go as the driver
 * takes them: strings for bigints and dates ({@link rowParams} maps a table's row).
 * @example
 * const nextNonce = namedStatement<{ next: number }>("next_nonce", "SELECT next_nonce FROM evm_nonces WHERE chain = $1 AND address = $2", [[["next"], evmNonces.nextNonce]]);
 * const [row] = await nextNonce(db, ["base", address]);
 */
export function namedStatement<Row = never>(
  name: string,
  text: string,
  fields: readonly RowField[] = [],
): (db: Db | Tx, params: unknown[]) => Promise<Row[]> {
  const ordered = fields.map(([path, field]) => ({ path: [...path], field }));
  return async (db, params) => {
    const prepared = db._.session.prepareQuery(
      { sql: text, params },
      ordered.length > 0 ? ordered : undefined,
      name,
      false,
    );
    const result: unknown = await prepared.execute();
    return ordered.length > 0 ? (result as Row[]) : [];
  };
}

/**
 * {@link namedStatement}s whose text depends on a statement's shape (how many rows it writes, which parts
 * it has): each shape's built once, on first use, and kept.
 * @example const insertEvents = statementsByShape((count: number) => ({ name: `events_${count}`, text: eventsSql(count) }));
 */
export function statementsByShape<Shape extends string | number, Row = never>(
  build: (shape: Shape) => { name: string; text: string; fields?: readonly RowField[] },
): (shape: Shape) => (db: Db | Tx, params: unknown[]) => Promise<Row[]> {
  const built = new Map<Shape, (db: Db | Tx, params: unknown[]) => Promise<Row[]>>();
  return (shape) => {
    let statement = built.get(shape);
    if (!statement) {
      const { name, text, fields } = build(shape);
      statement = namedStatement<Row>(name, text, fields);
      built.set(shape, statement);
    }
    return statement;
  };
}

/** A table's columns in one order: their quoted names for SQL text, and fields under `path` for the rows. */
export function tableColumns(table: PgTable, path: readonly string[] = [], qualifier = "") {
  const entries = Object.entries(getTableColumns(table));
  return {
    /** `"a", "b"`, or `q."a", q."b"` with a qualifier. */
    list: entries.map(([, column]) => `${qualifier ? `${qualifier}.` : ""}"${column.name}"`).join(", "),
    fields: entries.map(([key, column]): RowField => [[...path, key], column]),
  };
}

/**
 * The parameters of a whole row of `table`, in {@link tableColumns}' order, as its columns map them for the
 * driver (null for what the row leaves out).
 */
export function rowParams<T extends PgTable>(table: T, row: Partial<T["$inferSelect"]>): unknown[] {
  return Object.entries(getTableColumns(table)).map(([key, column]) => {
    const value = (row as Record<string, unknown>)[key];
    return value === undefined || value === null ? null : column.mapToDriverValue(value);
  });
}
