import os from "node:os";
import { type ApiKeyRole, SvcNotFoundError, SvcWallet } from "@svc/sdk";
import { type Command, Option } from "commander";
import { readConfig, writeConfig } from "../config.ts";
import type { Context } from "../context.ts";
import { usage } from "../failure.ts";
import { fields, when } from "../output.ts";
import { list } from "../parse.ts";
import { keyTable } from "../views.ts";
import { readSecret } from "./prompt.ts";

/**
 * `svc login` and `svc keys create|list|revoke`.
 * @example
 * addAccountCommands(program, contextOf);
 */
export function addAccountCommands(program: Command, contextOf: (command: Command) => Context): void {
  program
    .command("login")
    .description(
      "log in with email and password; saves the base URL and a new admin API key to the config file (mode 0600)",
    )
    .option("--email <email>", "the account's email (default $SVC_EMAIL, else asked)")
    .addHelpText(
      "after",
      "\nThe password is read from $SVC_PASSWORD, else asked on the terminal (not echoed), else read from stdin.",
    )
    .action(async (options: { email?: string }, command: Command) => {
      const ctx = contextOf(command);
      const baseUrl = await ctx.baseUrl();
      const email =
        options.email ?? ctx.env.SVC_EMAIL ?? (process.stdin.isTTY ? await readSecret("Email: ", true) : "");
      if (!email) throw usage("login needs --email (or $SVC_EMAIL)");
      const password = ctx.env.SVC_PASSWORD ?? (await readSecret("Password: ", false));
      if (!password) throw usage("login needs a password ($SVC_PASSWORD, the terminal, or stdin)");
      const { accessToken } = await new SvcWallet({ baseUrl }).auth.login({ email, password });
      // The access token lasts an hour; the CLI keeps an admin key of its own instead, until revoked.
      const admin = new SvcWallet({ apiKey: accessToken, baseUrl });
      const created = await admin.apiKeys.create({ name: `svc cli on ${os.hostname()}`, role: "admin" });
      const previous = await readConfig(ctx.configFile);
      await writeConfig(ctx.configFile, { baseUrl, apiKey: created.key, keyId: created.id, email });
      // The key this file held before is of no further use: revoke it (it may be gone or another account's).
      if (previous.keyId && previous.baseUrl === baseUrl && previous.keyId !== created.id) {
        await admin.apiKeys.revoke(previous.keyId).catch((error) => {
          if (!(error instanceof SvcNotFoundError)) throw error;
        });
      }
      ctx.print(
        { email, baseUrl, keyId: created.id, configFile: ctx.configFile },
        () =>
          `Logged in as ${email} at ${baseUrl}\nSaved admin key ${created.id} (${created.name}) to ${ctx.configFile} (mode 0600)`,
      );
    });

  const keys = program.command("keys").description("API keys of the account (admin)");
  keys
    .command("create <name>")
    .description("create an API key; its value is shown this once")
    .addOption(
      new Option("--role <role>", "what the key may do").choices(["agent", "admin", "read"]).default("agent"),
    )
    .option("--wallets <ids>", "comma-separated wallet ids the key is bound to (default: every wallet)")
    .option("--expires-at <time>", "ISO 8601 time after which the key stops working")
    .action(
      async (
        name: string,
        options: { role: ApiKeyRole; wallets?: string; expiresAt?: string },
        command: Command,
      ) => {
        const ctx = contextOf(command);
        const svc = await ctx.client();
        const created = await svc.apiKeys.create({
          name,
          role: options.role,
          ...(options.wallets === undefined ? {} : { walletIds: list(options.wallets) }),
          ...(options.expiresAt === undefined ? {} : { expiresAt: options.expiresAt }),
        });
        ctx.print(created, () =>
          [
            fields([
              ["id", created.id],
              ["name", created.name],
              ["role", created.role ?? ""],
              ["wallets", created.walletIds ? created.walletIds.join(", ") : "all"],
              ["expires", created.expiresAt ? when(created.expiresAt) : "never"],
              ["key", created.key],
            ]),
            "The key is shown this once: store it now.",
          ].join("\n"),
        );
      },
    );
  keys
    .command("list")
    .description("the account's active keys (never their values)")
    .action(async (_options: unknown, command: Command) => {
      const ctx = contextOf(command);
      const found = await (await ctx.client()).apiKeys.list();
      ctx.print(found, () => keyTable(found));
    });
  keys
    .command("revoke <keyId>")
    .description("revoke a key, immediately and for good")
    .action(async (keyId: string, _options: unknown, command: Command) => {
      const ctx = contextOf(command);
      await (await ctx.client()).apiKeys.revoke(keyId);
      ctx.print({ id: keyId, revoked: true }, () => `Revoked ${keyId}`);
    });
}
