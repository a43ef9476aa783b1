import { Command } from "commander";
import { addAccountCommands } from "./commands/account.ts";
import { addApprovalCommands } from "./commands/approvals.ts";
import { addPolicyCommands } from "./commands/policy.ts";
import { addSpendCommands } from "./commands/spend.ts";
import { addWalletCommands } from "./commands/wallets.ts";
import { addWebhookCommands } from "./commands/webhooks.ts";
import { type Context, createContext, type GlobalOptions } from "./context.ts";

/**
 * The `svc` program: global options and every command. Commander's own usage errors throw (exitOverride)
 * so `main` decides the exit code.
 * @example
 * await buildProgram(process.env, false).parseAsync(process.argv);
 */
export function buildProgram(env: NodeJS.ProcessEnv, json: boolean): Command {
  const program = new Command("svc")
    .description(
      "The Svc wallet service from a terminal: wallets, policies, sends, x402 payments, approvals, webhooks",
    )
    .version("0.1.0")
    .option(
      "--api-key <key>",
      "API key (default $SVC_API_KEY, else the config file); other users see it in the process list",
    )
    .option(
      "--base-url <url>",
      "service URL ending in /v1 (default $SVC_BASE_URL, else the config file, else http://127.0.0.1:8080/v1)",
    )
    .option("--json", 'machine-readable output: one JSON value on stdout; failures as {"error":…} on stderr')
    .option("-v, --verbose", "on failure, also print the status, details and cause")
    .showSuggestionAfterError()
    .configureOutput({
      // With --json a usage error is the same one-line JSON as any other failure.
      outputError: (text, write) =>
        write(
          json
            ? `${JSON.stringify({ error: { code: "UsageError", message: text.replace(/^error: /, "").trim() } })}\n`
            : text,
        ),
    })
    .exitOverride()
    .addHelpText(
      "after",
      `
Config file: $SVC_CONFIG, else $XDG_CONFIG_HOME/svc/config.json, else ~/.config/svc/config.json
             (written by svc login, mode 0600).
Exit codes: 0 ok, 1 usage or invalid input, 2 credential or role, 3 policy refused, 4 insufficient funds,
            5 not found, 6 service unreachable, 7 service, chain or resource failed, 8 still pending at --timeout.`,
    );
  const contextOf = (command: Command): Context =>
    createContext(command.optsWithGlobals<GlobalOptions>(), env);
  addAccountCommands(program, contextOf);
  addWalletCommands(program, contextOf);
  addSpendCommands(program, contextOf);
  addPolicyCommands(program, contextOf);
  addApprovalCommands(program, contextOf);
  addWebhookCommands(program, contextOf);
  // Subcommands report their usage errors the same way as the program.
  const sameErrors = (command: Command): void => {
    for (const sub of command.commands) {
      sub.exitOverride().configureOutput(program.configureOutput());
      sameErrors(sub);
    }
  };
  sameErrors(program);
  return program;
}
