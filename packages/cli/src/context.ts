import { SvcWallet, type Transaction, type Wallet } from "@svc/sdk";
import { configPath, readConfig, resolveCredentials } from "./config.ts";
import { CliError, EXIT } from "./failure.ts";
import { printable, startSpinner, tokenAmount } from "./output.ts";
import { unconfirmedLine } from "./views.ts";

/** The options every command accepts (set on the program). */
export interface GlobalOptions {
  apiKey?: string;
  baseUrl?: string;
  json?: boolean;
  verbose?: boolean;
}

/** How a command reaches the service and prints: shared by every command of one run. */
export interface Context {
  json: boolean;
  verbose: boolean;
  env: NodeJS.ProcessEnv;
  /** The config file's path (`$SVC_CONFIG` or the default). */
  configFile: string;
  /** A client with the resolved credentials; throws exit code 2 when there is no API key. */
  client(): Promise<SvcWallet>;
  /** The resolved base URL (no credential needed). */
  baseUrl(): Promise<string>;
  /** Prints `human()` to stdout, or `value` as one line of JSON with `--json`. */
  print(value: unknown, human: () => string): void;
}

/**
 * The context of one run, from the global options and the environment.
 * @example
 * const ctx = createContext({ json: true }, process.env);
 * const wallets = await (await ctx.client()).wallet.list();
 */
export function createContext(options: GlobalOptions, env: NodeJS.ProcessEnv): Context {
  const json = options.json === true;
  // With --json stderr holds only the failure's JSON; the README says the same there.
  if (options.apiKey !== undefined && !json) {
    process.stderr.write(
      "warning: --api-key shows the key in the process list, where other users of this machine can read it; set SVC_API_KEY or run `svc login` instead\n",
    );
  }
  const configFile = configPath(env);
  const resolved = async () =>
    resolveCredentials(
      { flags: { apiKey: options.apiKey, baseUrl: options.baseUrl }, env },
      await readConfig(configFile),
    );
  const credentials = async () => {
    const { baseUrl, apiKey, savedKeyFor } = await resolved();
    if (apiKey === undefined && savedKeyFor !== undefined) {
      throw new CliError(
        `The saved key is for ${savedKeyFor}, not ${baseUrl}: pass --api-key, set SVC_API_KEY, or run \`svc login\` there`,
        EXIT.auth,
      );
    }
    if (apiKey === undefined) {
      throw new CliError("No credential: run `svc login`, pass --api-key, or set SVC_API_KEY", EXIT.auth);
    }
    return { baseUrl, apiKey };
  };
  return {
    json,
    verbose: options.verbose === true,
    env,
    configFile,
    baseUrl: async () => (await resolved()).baseUrl,
    client: async () => new SvcWallet(await credentials()),
    print: (value, human) => {
      process.stdout.write(`${json ? JSON.stringify(value) : printable(human(), { keepLines: true })}\n`);
    },
  };
}

/**
 * Follows a broadcast transaction until it is final (the SDK's `waitForTransaction`, read every 500 ms),
 * with a spinner on a terminal. Still pending at `timeoutSeconds`: the SDK's `WaitTimeout`, exit code 8 (it
 * may yet confirm). Failed or rejected: exit code 7.
 * @example
 * const confirmed = await waitForConfirmation(ctx, wallet, tx, 120);
 */
export async function waitForConfirmation(
  ctx: Context,
  wallet: Wallet,
  sent: Transaction,
  timeoutSeconds: number,
): Promise<Transaction> {
  if (sent.status !== "pending") return sent;
  const spinner = startSpinner(
    `Confirming ${tokenAmount(sent.amount, sent.token)} on ${sent.chain} (${sent.txHash ?? sent.id})`,
    !ctx.json,
  );
  const tx = await wallet
    .waitForTransaction(sent.id, { timeoutMs: timeoutSeconds * 1000, intervalMs: 500 })
    .finally(() => spinner.stop());
  if (tx.status !== "confirmed") {
    throw new CliError(unconfirmedLine(tx), EXIT.failed, { transactionId: tx.id, status: tx.status });
  }
  return tx;
}
