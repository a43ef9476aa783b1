import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PGlite, TransactionAbortedError, types } from "@electric-sql/pglite";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { initializedPglite } from "../../../test/support/pglite-setup.ts";
import { PgliteConnection } from "./pglite-connection.ts";

let pg: PGlite;
let connection: PgliteConnection;

beforeEach(async () => {
  pg = await PGlite.create({ loadDataDir: initializedPglite() });
  await pg.exec(`CREATE TABLE items (
    id serial PRIMARY KEY, n bigint NOT NULL, amount numeric, at timestamptz, data jsonb, tags text[],
    name text UNIQUE)`);
  connection = new PgliteConnection(pg);
});
afterEach(async () => {
  if (!pg.closed) await pg.close();
});

/** The statements the backend holds under a name, as PostgreSQL lists them. */
async function preparedTexts(): Promise<string[]> {
  const { rows } = await pg.query<{ statement: string }>(
    "SELECT statement FROM pg_prepared_statements WHERE from_sql = false ORDER BY statement",
  );
  return rows.map((row) => row.statement);
}

describe("PgliteConnection", () => {
  it("answers as PGlite's own query does, in both row modes and with a caller's parsers", async () => {
    const insert =
      "INSERT INTO items (n, amount, at, data, tags, name) VALUES ($1, $2, $3, $4, $5, $6), ($7, $8, $9, $10, $11, $12)";
    const params = [
      "9007199254740993",
      "123.000001",
      "2026-11-26T10:00:00.000Z",
      { a: [1, "x"] },
      ["p", "q"],
      "first",
      1,
      null,
      null,
      null,
      null,
      null,
    ];
    const inserted = await connection.query(insert, params);
    expect(inserted).toMatchObject({ command: "INSERT", rowCount: 2, affectedRows: 2, rows: [] });
    const updated = await connection.query("UPDATE items SET n = n WHERE n = $1", [1]);
    expect(updated).toEqual(await pg.query("UPDATE items SET n = n WHERE n = $1", [1]));
    const select = "SELECT id, n, amount, at, data, tags, name FROM items WHERE n >= $1 ORDER BY id";
    for (const options of [
      undefined,
      { rowMode: "array" as const },
      { rowMode: "array" as const, parsers: { [types.TIMESTAMPTZ]: (value: string) => value } },
    ]) {
      expect(await connection.query(select, [0], options)).toEqual(await pg.query(select, [0], options));
    }
    const [row] = (await connection.query<{ n: bigint; data: unknown }>(select, [0])).rows;
    expect(row?.n).toBe(9007199254740993n);
    expect(row?.data).toEqual({ a: [1, "x"] });
  });

  it("parses a statement once, and keeps no more statements than its limit", async () => {
    const small = new PgliteConnection(pg, { maxPrepared: 3 });
    for (let i = 0; i < 5; i++) await small.query("SELECT n FROM items WHERE id = $1", [i]);
    expect(await preparedTexts()).toEqual(["SELECT n FROM items WHERE id = $1"]);
    for (let i = 0; i < 6; i++) await small.query(`SELECT ${i} AS k`);
    // The oldest are closed with the next statement, so the listing (one more statement) shows three.
    expect(await preparedTexts()).toEqual(["SELECT 3 AS k", "SELECT 4 AS k", "SELECT 5 AS k"]);
    expect((await small.query<{ k: number }>("SELECT 0 AS k")).rows).toEqual([{ k: 0 }]);
  });

  it("gives each of a transaction's concurrent statements its own answer", async () => {
    const answers = await connection.transaction((tx) =>
      Promise.all(Array.from({ length: 20 }, (_, i) => tx.query<{ i: number }>("SELECT $1::int AS i", [i]))),
    );
    expect(answers.map((answer) => answer.rows[0]?.i)).toEqual(Array.from({ length: 20 }, (_, i) => i));
  });

  it("keeps a statement issued outside a transaction out of it until the transaction ends", async () => {
    let release = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    let outside: Promise<{ rows: { count: number }[] }> | undefined;
    const transaction = connection.transaction(async (tx) => {
      await tx.query("INSERT INTO items (n, name) VALUES ($1, $2)", [1, "inside"]);
      // Asked for while the transaction holds its row: it must wait, not run inside the transaction.
      outside = connection.query<{ count: number }>("SELECT count(*)::int AS count FROM items");
      setTimeout(release, 20);
      await held;
      throw new Error("changed my mind");
    });
    await expect(transaction).rejects.toThrow("changed my mind");
    // It ran after the rollback: the row was never there for it.
    expect((await outside)?.rows).toEqual([{ count: 0 }]);
  });

  it("rolls back on the database's error, which keeps its code, and stays usable", async () => {
    await connection.query("INSERT INTO items (n, name) VALUES ($1, $2)", [1, "taken"]);
    const failed = connection.transaction(async (tx) => {
      await tx.query("INSERT INTO items (n, name) VALUES ($1, $2)", [2, "other"]);
      await tx.query("INSERT INTO items (n, name) VALUES ($1, $2)", [3, "taken"]);
    });
    await expect(failed).rejects.toMatchObject({ code: "23505", constraint: "items_name_key" });
    await expect(connection.query("SELEC nothing")).rejects.toMatchObject({ code: "42601" });
    const { rows } = await connection.query<{ name: string }>("SELECT name FROM items ORDER BY id");
    expect(rows).toEqual([{ name: "taken" }]);
  });

  it("refuses to commit a transaction a caught failure aborted, as PGlite does", async () => {
    const committed = connection.transaction(async (tx) => {
      await tx.query("INSERT INTO items (n, name) VALUES ($1, $2)", [1, "lost"]);
      await tx.query("SELECT 1/0").catch(() => {});
    });
    await expect(committed).rejects.toBeInstanceOf(TransactionAbortedError);
    expect((await connection.query("SELECT * FROM items")).rows).toEqual([]);
  });

  it("prepares a statement afresh when a schema change altered what it returns", async () => {
    await connection.query("SELECT * FROM items");
    await pg.exec("ALTER TABLE items ADD COLUMN extra text");
    await expect(connection.query("SELECT * FROM items")).rejects.toMatchObject({ code: "0A000" });
    const { fields } = await connection.query("SELECT * FROM items");
    expect(fields.map((field) => field.name)).toContain("extra");
  });
});

describe("PgliteConnection, when something goes wrong around it", () => {
  it("keeps at least one statement, whatever its limit", async () => {
    const none = new PgliteConnection(pg, { maxPrepared: 0 });
    expect((await none.query("SELECT 2 AS two")).rows).toEqual([{ two: 2 }]);
    expect((await none.query("SELECT 2 AS two")).rows).toEqual([{ two: 2 }]);
    expect((await none.query("SELECT 3 AS three")).rows).toEqual([{ three: 3 }]);
  });

  it("closes once what was asked for has ended, refusing what comes after", async () => {
    const dir = mkdtempSync(join(tmpdir(), "svc-pglite-"));
    try {
      const onDisk = await PGlite.create({ dataDir: dir, loadDataDir: initializedPglite() });
      await onDisk.exec("CREATE TABLE items (n int)");
      const store = new PgliteConnection(onDisk);
      const slow = store.transaction(async (tx) => {
        await tx.query("INSERT INTO items VALUES ($1)", [0]);
        await new Promise((resolve) => setTimeout(resolve, 50));
      });
      const queued = Array.from({ length: 20 }, (_, i) =>
        store.query("INSERT INTO items VALUES ($1)", [i + 1]),
      );
      const closed = store.close();
      await expect(store.query("SELECT 1")).rejects.toThrow("the store is closed");
      await Promise.all([slow, ...queued, closed]);
      expect(onDisk.closed).toBe(true);
      const reopened = await PGlite.create(dir);
      expect((await reopened.query("SELECT count(*)::int AS n FROM items")).rows).toEqual([{ n: 21 }]);
      await reopened.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("runs nothing more once a transaction it could not end was left open", async () => {
    // A fault injected where nothing real can be made to fail: PGlite refusing the ROLLBACK.
    const execProtocol = pg.execProtocol.bind(pg);
    pg.execProtocol = async (message, options) => {
      if (new TextDecoder().decode(message).includes("ROLLBACK")) throw new Error("injected");
      return execProtocol(message, options);
    };
    const failed = connection.transaction(async (tx) => {
      await tx.query("INSERT INTO items (n, name) VALUES ($1, $2)", [1, "told it failed"]);
      throw new Error("work failed");
    });
    const next = connection.query("INSERT INTO items (n, name) VALUES ($1, $2)", [2, "next"]);
    await expect(failed).rejects.toThrow("work failed");
    // Run inside the open transaction, the next write would have committed the failed one's row with it.
    await expect(next).rejects.toThrow("left inside a failed transaction");
    await expect(next).rejects.toMatchObject({ cause: { message: "injected" } });
    await expect(connection.transaction(async () => {})).rejects.toThrow("left inside a failed transaction");
  });
});
