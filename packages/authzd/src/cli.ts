import { parseArgs } from "node:util";
import { anchorFileFor, readAnchorSync, unanchored } from "./audit/anchor.ts";
import { verifyAuditFileParallel } from "./audit/verify.ts";
import { CliError, operatorRequest } from "./cli/client.ts";
import { serve } from "./cli/serve.ts";
import { ConfigError, loadConfig } from "./internal/config.ts";
import { homePaths } from "./internal/home.ts";

const USAGE = `usage: authzd <command>

  serve                                            start the daemon
  identities create NAME [--budget CREDITS] [--max-per-call-cap ATOMIC]
                                                   create an identity; prints its token once
  identities list
  capabilities grant CAP --to NAME [--expires-in SECONDS | --expires-at ISO]
  capabilities revoke CAP --from NAME
  capabilities list [--for NAME]
  budgets show NAME                                reserved, settled, expired-unsettled and available
                                                   credits
  audit verify [--file PATH] [--anchor PATH] [--threads N]
                                                   verify the hash chain and its head anchor (reads
                                                   the files directly; anchor default: audit.head
                                                   beside the log)
  audit recent [--limit N]

Capabilities: wallet.spend.authorize, wallet.spend.settle, wallet.spend.verify, audit.read.
Environment: AUTHZD_HOME (default ./.authzd), AUTHZD_HOST, AUTHZD_PORT, AUTHZD_URL, SPEND_AUTHZ_ENABLED=1,
AUTHZD_BUDGET_CREDITS, AUTHZD_BUDGET_WINDOW_SECONDS, AUTHZD_RESERVATION_TTL_SECONDS, AUTHZD_MAX_PER_CALL_CAP,
AUTHZD_SPEND_RATE_LIMIT_PER_SECOND (0 = off), AUTHZD_SPEND_RATE_LIMIT_BURST,
AUTHZD_ALLOW_PROVIDERS, AUTHZD_ALLOW_NETWORKS, AUTHZD_ALLOW_ASSETS, AUTHZD_ALLOW_DESTINATIONS (comma lists).`;

function print(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

async function run(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      budget: { type: "string" },
      "max-per-call-cap": { type: "string" },
      to: { type: "string" },
      from: { type: "string" },
      for: { type: "string" },
      "expires-in": { type: "string" },
      "expires-at": { type: "string" },
      file: { type: "string" },
      anchor: { type: "string" },
      limit: { type: "string" },
      threads: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  const [group, action, arg] = positionals;
  if (values.help || group === undefined || group === "help") {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  if (group === "serve") {
    await serve();
    return -1;
  }
  const config = loadConfig();
  const paths = homePaths(config.home);
  const need = (value: string | undefined, what: string): string => {
    if (value === undefined || value === "") throw new CliError(`missing ${what}\n\n${USAGE}`);
    return value;
  };
  const command = `${group} ${action ?? ""}`;
  switch (command) {
    case "identities create": {
      const budget = values.budget === undefined ? undefined : Number(values.budget);
      if (budget !== undefined && (!Number.isSafeInteger(budget) || budget < 0)) {
        throw new CliError("--budget must be a non-negative integer");
      }
      const ceiling = values["max-per-call-cap"];
      print(
        await operatorRequest(paths, "POST", "/identities", {
          name: need(arg, "NAME"),
          ...(budget === undefined ? {} : { budget_credits: budget }),
          // Validated by the daemon, which names the expected format.
          ...(ceiling === undefined ? {} : { max_per_call_cap: ceiling }),
        }),
      );
      return 0;
    }
    case "identities list":
      print(await operatorRequest(paths, "GET", "/identities"));
      return 0;
    case "capabilities grant": {
      let expiresAt: string | undefined = values["expires-at"];
      if (values["expires-in"] !== undefined) {
        const seconds = Number(values["expires-in"]);
        if (!(seconds > 0)) throw new CliError("--expires-in must be a positive number of seconds");
        expiresAt = new Date(Date.now() + seconds * 1000).toISOString();
      }
      print(
        await operatorRequest(paths, "POST", "/capabilities/grant", {
          identity: need(values.to, "--to NAME"),
          capability: need(arg, "CAP"),
          ...(expiresAt === undefined ? {} : { expires_at: expiresAt }),
        }),
      );
      return 0;
    }
    case "capabilities revoke":
      print(
        await operatorRequest(paths, "POST", "/capabilities/revoke", {
          identity: need(values.from ?? values.to, "--from NAME"),
          capability: need(arg, "CAP"),
        }),
      );
      return 0;
    case "capabilities list": {
      const query = values.for === undefined ? "" : `?identity=${encodeURIComponent(values.for)}`;
      print(await operatorRequest(paths, "GET", `/capabilities${query}`));
      return 0;
    }
    case "budgets show":
      print(await operatorRequest(paths, "GET", `/budgets/${encodeURIComponent(need(arg, "NAME"))}`));
      return 0;
    case "audit verify": {
      const threads = values.threads === undefined ? undefined : Number(values.threads);
      if (threads !== undefined && !(Number.isSafeInteger(threads) && threads >= 1 && threads <= 64)) {
        throw new CliError("--threads must be an integer from 1 to 64");
      }
      const file = values.file ?? paths.auditLog;
      const anchorFile = values.anchor ?? anchorFileFor(file);
      const anchor = readAnchorSync(anchorFile);
      const report = await verifyAuditFileParallel(file, {
        ...(threads === undefined ? {} : { threads }),
        ...(anchor === null ? {} : { anchor }),
      });
      const unvouched = unanchored(anchor, report.rows, anchorFile);
      if (unvouched !== undefined) {
        process.stderr.write(`authzd: ${unvouched}; rows cut off the end of the log cannot be detected\n`);
      }
      print(report);
      return report.valid ? 0 : 1;
    }
    case "audit recent":
      print(await operatorRequest(paths, "GET", `/audit/recent?limit=${values.limit ?? "50"}`));
      return 0;
    default:
      throw new CliError(`unknown command: ${command.trim()}\n\n${USAGE}`);
  }
}

try {
  const code = await run(process.argv.slice(2));
  if (code >= 0) process.exitCode = code;
} catch (error) {
  if (error instanceof CliError || error instanceof ConfigError) {
    process.stderr.write(`${error.message}\n`);
  } else {
    process.stderr.write(`authzd: ${(error as Error).message}\n`);
  }
  process.exitCode = 2;
}
