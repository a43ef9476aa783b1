import { PGlite } from "@electric-sql/pglite";
import { sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/pglite";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { initializedPglite } from "../../test/support/pglite-setup.ts";
import { loggerOptions } from "./logging.ts";

const SECRET = "hash-of-a-key-Zq81vT0wLm";
let pg: PGlite;
let failedQuery: Error;
let badInput: Error;

/** What a query that failed throws, as drizzle throws it: its parameters in its message and beside it. */
async function failure(statement: Promise<unknown>): Promise<Error> {
  return statement.then(
    () => new Error("the statement did not fail"),
    (error: Error) => error,
  );
}

beforeAll(async () => {
  pg = await PGlite.create({ loadDataDir: initializedPglite() });
  await pg.exec("CREATE TABLE keys (key_hash text UNIQUE, n int)");
  const db = drizzle(pg);
  await db.execute(sql`INSERT INTO keys (key_hash) VALUES (${SECRET})`);
  failedQuery = await failure(db.execute(sql`INSERT INTO keys (key_hash) VALUES (${SECRET})`));
  badInput = await failure(db.execute(sql`SELECT ${SECRET}::int`));
});
afterAll(() => pg.close());

/** The text the service's logger writes for one log call. */
function logged(log: (logger: pino.Logger) => void): string {
  const lines: string[] = [];
  log(pino(loggerOptions("info"), { write: (line: string) => void lines.push(line) }));
  return lines.join("");
}

describe("the service's log", () => {
  it("writes a failed query as its statement and its database error's fields, none of its values", () => {
    // A logger without the service's options writes the values.
    const unguarded: string[] = [];
    pino({}, { write: (line: string) => void unguarded.push(line) }).error({ err: failedQuery }, "failed");
    expect(unguarded.join("")).toContain(SECRET);

    const line = JSON.parse(logged((log) => log.error({ err: failedQuery }, "failed")));
    expect(JSON.stringify(line)).not.toContain(SECRET);
    expect(line.err).toMatchObject({
      type: "DrizzleQueryError",
      query: "INSERT INTO keys (key_hash) VALUES ($1)",
      cause: { code: "23505", constraint: "keys_key_hash_key", table: "keys" },
    });
    expect(line.err.cause.message).toContain("duplicate key value violates unique constraint");
    // Its own frames, from where the query failed, not from the log call.
    expect(line.err.stack).toMatch(/^DrizzleQueryError: Failed query\n {4}at /);
    expect(line.err.stack).not.toContain("logging.ts");
  });

  it("leaves out a data exception's message, which quotes the value", () => {
    const line = JSON.parse(logged((log) => log.error({ err: badInput }, "failed")));
    expect(JSON.stringify(line)).not.toContain(SECRET);
    expect(line.err.cause).toMatchObject({ code: "22P02" });
  });

  it("finds a failed query wherever it is in what is logged, however it is logged", () => {
    const plainCause = { message: "a plain object pino treats as an error", cause: failedQuery };
    const lines = [
      logged((log) => log.error(failedQuery)),
      logged((log) => log.error({ err: failedQuery })),
      logged((log) => log.error({ err: new Error("could not record", { cause: failedQuery }) }, "failed")),
      logged((log) => log.error({ err: new AggregateError([failedQuery, badInput], "both failed") }, "x")),
      logged((log) => log.error({ err: plainCause }, "failed")),
      logged((log) =>
        log.error({ err: Object.assign(new Error("wrapped"), { original: failedQuery }) }, "x"),
      ),
      logged((log) =>
        log.error({ err: [1, 2, 3].reduce((err) => new Error("deeper", { cause: err }), failedQuery) }, "x"),
      ),
    ];
    for (const line of lines) {
      expect(line).not.toContain(SECRET);
      expect(line).toContain("INSERT INTO keys (key_hash) VALUES ($1)");
    }
    // With no message of its own, the line takes the error's message as written.
    expect(JSON.parse(lines[0] ?? "{}").msg).toBe("Failed query");
  });

  it("writes an error it cannot read as such, and never throws", () => {
    class GetterOnly extends Error {
      override get message(): string {
        throw new Error("unreadable");
      }
    }
    const looping = new Error("a");
    const other = new Error("b", { cause: looping });
    looping.cause = other;
    const frozen = Object.freeze(new Error("frozen", { cause: failedQuery }));
    for (const err of [new GetterOnly(), looping, frozen]) {
      const line = logged((log) => log.error({ err }, "failed"));
      expect(line).toContain('"msg":"failed"');
      expect(line).not.toContain(SECRET);
    }
  });
});
