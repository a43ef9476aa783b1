import { mkdirSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { PGlite } from "@electric-sql/pglite";
import { type SQL, sql } from "drizzle-orm";
import { drizzle as drizzleNodePg } from "drizzle-orm/node-postgres";
import type { PgDatabase, PgQueryResultHKT } from "drizzle-orm/pg-core";
import { drizzle as drizzlePglite } from "drizzle-orm/pglite";
import pg from "pg";
import * as schema from "./schema.ts";

/** The drizzle database, whichever driver is underneath. */
export type Db = PgDatabase<PgQueryResultHKT, typeof schema>;

/** An open store: the database, which engine it is, and how to close it. */
export interface Store {
  db: Db;
  kind: "pglite" | "postgres";
  /** Resolves when the store answers a trivial query. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** Where the store lives: a PostgreSQL URL, a PGlite data directory, or PGlite in memory (tests). */
export type StoreLocation = { databaseUrl: string } | { pgliteDir: string } | { pgliteMemory: true };

const migrationsDir = fileURLToPath(new URL("./migrations/", import.meta.url));

/**
 * Opens the store and applies any migrations it lacks.
 * @example
 * const store = await openStore({ pgliteDir: "./.svc-data/pg" });
 */
export async function openStore(location: StoreLocation): Promise<Store> {
  if ("databaseUrl" in location) {
    const pool = new pg.Pool({ connectionString: location.databaseUrl, max: 10 });
    // An idle client that loses its connection emits 'error'; the next checkout reconnects.
    pool.on("error", () => {});
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
    const db = drizzleNodePg(pool, { schema }) as unknown as Db;
    return {
      db,
      kind: "postgres",
      ping: async () => {
        await pool.query("SELECT 1");
      },
      close: () => pool.end(),
    };
  }

  let client: PGlite;
  if ("pgliteDir" in location) {
    mkdirSync(location.pgliteDir, { recursive: true });
    client = await PGlite.create(location.pgliteDir);
  } else {
    client = await PGlite.create();
  }
  await migrate({
    // PGlite has one connection and one process: nothing else can migrate beside us.
    withLock: (work) => work(async (text) => void (await client.exec(text))),
    appliedVersions: async () =>
      (await client.query<{ version: number }>("SELECT version FROM schema_migrations")).rows,
  });
  const db = drizzlePglite(client, { schema }) as unknown as Db;
  return {
    db,
    kind: "pglite",
    ping: async () => {
      await db.execute(sql`SELECT 1`);
    },
    close: () => client.close(),
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

/** True when the error (or one it wraps) is PostgreSQL's unique_violation, of `constraint` when one is named. */
export function isUniqueViolation(error: unknown, constraint?: string): boolean {
  for (let e: unknown = error, depth = 0; e && depth < 5; depth++) {
    if (typeof e === "object" && "code" in e && (e as { code: unknown }).code === "23505")
      return constraint === undefined || (e as { constraint?: unknown }).constraint === constraint;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

/** Rows of a raw SQL query, whichever driver is underneath (both answer `{ rows }`). */
export async function selectRows<T>(db: Db, query: SQL): Promise<T[]> {
  return ((await db.execute(query)) as unknown as { rows: T[] }).rows;
}

/**
 * A prepared statement built once for each open store and reused: hot paths skip query building and the
 * database keeps the plan.
 */
export function preparedPerDb<T>(build: (db: Db) => T): (db: Db) => T {
  const cache = new WeakMap<Db, T>();
  return (db) => {
    let prepared = cache.get(db);
    if (prepared === undefined) {
      prepared = build(db);
      cache.set(db, prepared);
    }
    return prepared;
  };
}
