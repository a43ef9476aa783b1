import os from "node:os";
import {
  type ApiKeyRole,
  SvcNotFoundError,
  SvcUnauthorizedError,
  SvcValidationError,
  SvcWallet,
} from "@svc/sdk";
import { type Command, Option } from "commander";
import { readConfig, savedKeyBaseUrl, writeConfig } from "../config.ts";
import type { Context } from "../context.ts";
import { usage } from "../failure.ts";
import { fields, when } from "../output.ts";
import { list } from "../parse.ts";
import { keyTable } from "../views.ts";
import { readSecret } from "./prompt.ts";

/**
 * `svc register`, `svc login`, `svc logout` and `svc keys create|list|revoke`.
 * @example
 * addAccountCommands(program, contextOf);
 */
export function addAccountCommands(program: Command, contextOf: (command: Command) => Context): void {
  program
    .command("register")
    .description("create an account with email and password (then `svc login`)")
    .option("--email <email>", "the account's email (default $SVC_EMAIL, else asked)")
    .option("--name <name>", "a display name")
    .option("--password-stdin", "read the password from the first line of stdin instead of asking")
    .addHelpText(
      "after",
      "\nThe password (at least 12 characters) is asked on the terminal, not echoed, twice; with --password-stdin it is the first line of stdin.",
    )
    .action(async (options: { email?: string; name?: string; passwordStdin?: boolean }, command: Command) => {
      const ctx = contextOf(command);
      const baseUrl = await ctx.baseUrl();
      const email =
        options.email ?? ctx.env.SVC_EMAIL ?? (process.stdin.isTTY ? await readSecret("Email: ", true) : "");
      if (!email) throw usage("register needs --email (or $SVC_EMAIL)");
      let password: string;
      if (options.passwordStdin) password = await readSecret("", false, { fromStdin: true });
      else {
        // Without a terminal there is nobody to ask; a password is never taken from an argument.
        if (!process.stdin.isTTY)
          throw usage("register needs a terminal to ask the password, or --password-stdin");
        password = await readSecret("Password: ", false);
        if (password !== (await readSecret("Password again: ", false)))
          throw usage("the two passwords differ; nothing was registered");
      }
      if (!password) throw usage("register needs a password (the terminal, or --password-stdin)");
      const account = await new SvcWallet({ baseUrl }).auth.register({
        email,
        password,
        ...(options.name === undefined ? {} : { name: options.name }),
      });
      ctx.print(
        { ...account, baseUrl },
        () =>
          `Registered ${account.email} (${account.userId}) at ${baseUrl}\nLog in with: svc login --email ${account.email}`,
      );
    });

  program
    .command("logout")
    .description("revoke the config file's API key and remove it from the file")
    .action(async (_options: unknown, command: Command) => {
      const ctx = contextOf(command);
      const saved = await readConfig(ctx.configFile);
      if (saved.apiKey === undefined) {
        ctx.print(
          { configFile: ctx.configFile, keyId: null, revoked: false },
          () => `Not logged in: ${ctx.configFile} holds no key`,
        );
        return;
      }
      const { apiKey, keyId, email: _email, ...kept } = saved;
      // The key was made for this file (svc login): revoked with itself, so it is of no use to a copy. One
      // the service no longer takes (revoked, expired) is gone already; any other failure keeps the file as
      // it is, so that the key is not lost while it still works.
      let revoked = false;
      // Revoked at the service it was saved for, whatever --base-url or SVC_BASE_URL say: it goes nowhere else.
      const savedFor = savedKeyBaseUrl(saved);
      if (keyId !== undefined && savedFor === undefined) {
        throw usage(
          `${ctx.configFile} names no service its key is for (baseUrl ${JSON.stringify(saved.baseUrl)}): fix the file, or revoke key ${keyId} with svc keys revoke`,
        );
      }
      if (keyId !== undefined && savedFor !== undefined) {
        try {
          await new SvcWallet({ apiKey, baseUrl: savedFor }).apiKeys.revoke(keyId);
          revoked = true;
        } catch (error) {
          if (!(error instanceof SvcUnauthorizedError || error instanceof SvcNotFoundError)) throw error;
        }
      }
      await writeConfig(ctx.configFile, kept);
      ctx.print(
        { configFile: ctx.configFile, keyId: keyId ?? null, revoked },
        () =>
          `Logged out: removed ${keyId ? `key ${keyId}` : "the key"} from ${ctx.configFile}${revoked ? ", and revoked it" : keyId ? " (the service had already ended it)" : " (no key id saved: revoke it with svc keys revoke)"}`,
      );
    });

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
      const previous = await readConfig(ctx.configFile);
      // A device token of another email or service is no use there, and harmless: the service ignores it.
      const { accessToken, deviceToken } = await new SvcWallet({ baseUrl }).auth.login({
        email,
        password,
        ...(previous.deviceToken !== undefined ? { deviceToken: previous.deviceToken } : {}),
      });
      // The access token lasts an hour; the CLI keeps an admin key of its own instead, until revoked.
      const admin = new SvcWallet({ apiKey: accessToken, baseUrl });
      // The key this file held before is of no further use: revoked (it may be gone or another account's).
      const previousKeyId = previous.keyId && previous.baseUrl === baseUrl ? previous.keyId : undefined;
      const revokePrevious = async () => {
        if (previousKeyId === undefined) return;
        await admin.apiKeys.revoke(previousKeyId).catch((error) => {
          if (!(error instanceof SvcNotFoundError)) throw error;
        });
      };
      const createKey = () => admin.apiKeys.create({ name: `svc cli on ${os.hostname()}`, role: "admin" });
      // Made before the old one goes, so a failure leaves the file's key working; but at the account's key
      // limit, the old one must go first to make room.
      let created: Awaited<ReturnType<typeof createKey>>;
      try {
        created = await createKey().catch(async (error: unknown) => {
          if (
            !(error instanceof SvcValidationError && error.reason === "too_many_api_keys") ||
            !previousKeyId
          )
            throw error;
          await revokePrevious();
          return createKey().catch(async (second: unknown) => {
            // The file's key is revoked now: it goes from the file, which says so by holding none.
            await writeConfig(ctx.configFile, { baseUrl, email, deviceToken });
            throw second;
          });
        });
        await writeConfig(ctx.configFile, {
          baseUrl,
          apiKey: created.key,
          keyId: created.id,
          email,
          deviceToken,
        });
        if (previousKeyId !== created.id) await revokePrevious();
      } finally {
        // The access token has done its work, or could not: ended, so it does not stay good for its hour.
        await admin.auth.logout().catch(() => undefined);
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
