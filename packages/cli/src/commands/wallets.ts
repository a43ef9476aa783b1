import type { Command } from "commander";
import type { Context } from "../context.ts";
import { usage } from "../failure.ts";
import { startSpinner, tokenAmount } from "../output.ts";
import { list, type PolicyOptions, policyFromOptions, wholeNumber } from "../parse.ts";
import { balanceView, transactionTable, transactionView, walletTable, walletView } from "../views.ts";
import { withPolicyOptions } from "./policy-options.ts";

/**
 * `svc wallets create|list|show|archive|restore`, `svc balance`, `svc history` and `svc faucet`.
 * @example
 * addWalletCommands(program, contextOf);
 */
export function addWalletCommands(program: Command, contextOf: (command: Command) => Context): void {
  const wallets = program.command("wallets").description("the account's wallets");
  withPolicyOptions(
    wallets
      .command("create <name>")
      .description("create a wallet (admin), optionally with its policy")
      .requiredOption(
        "--chains <names>",
        "comma-separated chains, e.g. base,solana (see the service's /v1/chains)",
      )
      .option("--metadata <json>", "a JSON object kept with the wallet"),
  ).action(
    async (
      name: string,
      options: PolicyOptions & { chains: string; metadata?: string },
      command: Command,
    ) => {
      const ctx = contextOf(command);
      let metadata: Record<string, unknown> | undefined;
      if (options.metadata !== undefined) {
        try {
          metadata = JSON.parse(options.metadata);
        } catch {
          throw usage("--metadata must be a JSON object");
        }
        if (metadata === null || typeof metadata !== "object" || Array.isArray(metadata)) {
          throw usage("--metadata must be a JSON object");
        }
      }
      const policy = policyFromOptions(options);
      const wallet = await (await ctx.client()).wallet.create({
        name,
        chains: list(options.chains),
        ...(metadata === undefined ? {} : { metadata }),
        ...(policy === undefined ? {} : { policy }),
      });
      ctx.print(wallet, () => walletView(wallet));
    },
  );
  wallets
    .command("list")
    .description("every wallet the credential may see, newest first")
    .action(async (_options: unknown, command: Command) => {
      const ctx = contextOf(command);
      const found = await (await ctx.client()).wallet.list();
      ctx.print(found, () => walletTable(found));
    });
  wallets
    .command("show <walletId>")
    .description("one wallet: its addresses, chains and status")
    .action(async (walletId: string, _options: unknown, command: Command) => {
      const ctx = contextOf(command);
      const wallet = await (await ctx.client()).wallet.get(walletId);
      ctx.print(wallet, () => walletView(wallet));
    });
  wallets
    .command("archive <walletId>")
    .description("archive a wallet: its history stays, no further spends")
    .action(async (walletId: string, _options: unknown, command: Command) => {
      const ctx = contextOf(command);
      const svc = await ctx.client();
      await (await svc.wallet.get(walletId)).archive();
      const archived = await svc.wallet.get(walletId);
      ctx.print(archived, () => `Archived ${archived.id} (${archived.name}); its history stays`);
    });
  wallets
    .command("restore <walletId>")
    .description("restore an archived wallet (an admin's): it spends again, under its policy")
    .action(async (walletId: string, _options: unknown, command: Command) => {
      const ctx = contextOf(command);
      const svc = await ctx.client();
      await (await svc.wallet.get(walletId)).restore();
      const restored = await svc.wallet.get(walletId);
      ctx.print(restored, () => `Restored ${restored.id} (${restored.name}); it spends again`);
    });

  program
    .command("balance <walletId>")
    .description("a wallet's balances on each of its chains, with USD values")
    .action(async (walletId: string, _options: unknown, command: Command) => {
      const ctx = contextOf(command);
      const balance = await (await (await ctx.client()).wallet.get(walletId)).balance();
      ctx.print(balance, () => balanceView(balance));
    });

  program
    .command("history <walletId>")
    .description("a wallet's transactions, newest first")
    .option("--limit <n>", "page size (at most 100)", wholeNumber("--limit", 1, 100), 20)
    .option("--offset <n>", "skip this many", wholeNumber("--offset", 0, Number.MAX_SAFE_INTEGER))
    .option("--type <type>", "send, receive or x402")
    .option("--chain <chain>", "only this chain")
    .action(
      async (
        walletId: string,
        options: { limit: number; offset?: number; type?: "send" | "receive" | "x402"; chain?: string },
        command: Command,
      ) => {
        const ctx = contextOf(command);
        const wallet = await (await ctx.client()).wallet.get(walletId);
        const page = await wallet.transactions({
          limit: options.limit,
          ...(options.offset === undefined ? {} : { offset: options.offset }),
          ...(options.type === undefined ? {} : { type: options.type }),
          ...(options.chain === undefined ? {} : { chain: options.chain }),
        });
        ctx.print(page, () => {
          if (page.total === 0) return `No transactions in ${wallet.id} yet`;
          const shown = `${page.offset + 1}–${page.offset + page.data.length} of ${page.total}`;
          return `${transactionTable(page.data)}\n${shown}`;
        });
      },
    );

  program
    .command("faucet <walletId>")
    .description("test coins from the service's faucet (local and test networks only)")
    .option("--chain <chain>", "the chain (default: the wallet's only chain)")
    .option("--token <symbol>", "USDC, ETH, SOL, …", "USDC")
    .option("--amount <amount>", "how much (default: the faucet's)")
    .action(
      async (
        walletId: string,
        options: { chain?: string; token: string; amount?: string },
        command: Command,
      ) => {
        const ctx = contextOf(command);
        const wallet = await (await ctx.client()).wallet.get(walletId);
        const chain = chainOf(wallet.chains, options.chain);
        const spinner = startSpinner(`Asking the faucet for ${options.token} on ${chain}`, !ctx.json);
        const received = await wallet
          .faucet({
            chain,
            token: options.token,
            ...(options.amount === undefined ? {} : { amount: options.amount }),
          })
          .finally(() => spinner.stop());
        ctx.print(
          received,
          () =>
            `Received ${tokenAmount(received.amount, received.token)} on ${chain}\n${transactionView(received)}`,
        );
      },
    );
}

/**
 * The chain a command acts on: the one given, else the wallet's only chain (a usage error when it has more).
 * @example
 * chainOf(["base"], undefined); // "base"
 */
export function chainOf(chains: string[], given: string | undefined): string {
  if (given !== undefined) return given;
  if (chains.length === 1 && chains[0] !== undefined) return chains[0];
  throw usage(`the wallet has several chains (${chains.join(", ")}): name one with --chain`);
}
