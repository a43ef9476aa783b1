import { PGlite } from "@electric-sql/pglite";
import { sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/pglite";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loggerOptions } from "./app.ts";

const SECRET = "hash-of-a-key-Zq81vT0wLm";
let pg: PGlite;
let failedQuery: Error;

beforeAll(async () => {
  pg = await PGlite.create();
  await pg.exec("CREATE TABLE keys (key_hash text UNIQUE)");
  const db = drizzle(pg);
  const insert = () => db.execute(sql`INSERT INTO keys (key_hash) VALUES (${SECRET})`);
  await insert();
  failedQuery = await insert().then(
    () => new Error("the second insert went in"),
    (error: Error) => error,
  );
});
afterAll(() => pg.close());

/** The lines the service's logger writes for one log call. */
function logged(fields: object): string {
  const lines: string[] = [];
  pino(loggerOptions("info"), { write: (line: string) => void lines.push(line) }).error(fields, "failed");
  return lines.join("");
}

describe("the service's log", () => {
  it("names a failed query's statement and its driver's error, and none of its values", () => {
    // What a log call without the service's serializer writes: the values, in the message and beside it.
    const unguarded: string[] = [];
    pino({}, { write: (line: string) => void unguarded.push(line) }).error({ err: failedQuery }, "failed");
    expect(unguarded.join("")).toContain(SECRET);

    for (const err of [failedQuery, new Error("could not record the response", { cause: failedQuery })]) {
      const line = logged({ err });
      expect(line).not.toContain(SECRET);
      expect(line).toContain("INSERT INTO keys (key_hash) VALUES ($1)");
      expect(line).toContain("(code 23505)");
      expect(line).toContain("duplicate key value violates unique constraint");
    }
    expect(logged({ err: new Error("could not record the response", { cause: failedQuery }) })).toContain(
      "could not record the response",
    );
  });
});
