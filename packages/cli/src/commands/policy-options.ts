import { type Command, Option } from "commander";
import { usdBound } from "../parse.ts";

/**
 * Adds the policy options `wallets create` and `policy set` share.
 * @example
 * withPolicyOptions(program.command("set <walletId>"));
 */
export function withPolicyOptions(command: Command): Command {
  return command
    .addOption(
      new Option("--max-per-tx <usd>", "largest single spend in USD, or none").argParser(
        usdBound("--max-per-tx"),
      ),
    )
    .addOption(
      new Option("--daily-limit <usd>", "USD spent in any 24 h, or none").argParser(
        usdBound("--daily-limit"),
      ),
    )
    .addOption(
      new Option("--alert-above <usd>", "spends above this raise an alert, or none").argParser(
        usdBound("--alert-above"),
      ),
    )
    .addOption(
      new Option(
        "--approval-above <usd>",
        "spends above this wait for an admin's approval, or none",
      ).argParser(usdBound("--approval-above")),
    )
    .option(
      "--whitelist <addresses>",
      "comma-separated recipients (addresses, x402 hostnames), or none for any",
    )
    .option("--require-spend-authorization", "every spend needs a decision of the authorization daemon")
    .option("--no-require-spend-authorization", "spends need no daemon decision");
}
