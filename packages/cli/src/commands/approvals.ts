import type { ApprovalStatus } from "@svc/sdk";
import { type Command, Option } from "commander";
import { type Context, waitForConfirmation } from "../context.ts";
import { table, tokenAmount, when } from "../output.ts";
import { wholeNumber } from "../parse.ts";
import { transactionView } from "../views.ts";

/**
 * `svc approvals list|approve|reject`: spends above a policy's approvalAbove, waiting for an admin.
 * @example
 * addApprovalCommands(program, contextOf);
 */
export function addApprovalCommands(program: Command, contextOf: (command: Command) => Context): void {
  const approvals = program.command("approvals").description("spends held above a policy's approvalAbove");
  approvals
    .command("list")
    .description("held spends in one state (pending: oldest first)")
    .addOption(
      new Option("--status <status>", "which")
        .choices(["pending", "approved", "rejected", "expired"])
        .default("pending"),
    )
    .option("--limit <n>", "at most this many", wholeNumber("--limit", 1, 100))
    .action(async (options: { status: ApprovalStatus; limit?: number }, command: Command) => {
      const ctx = contextOf(command);
      const held = await (await ctx.client()).approvals.list(options);
      ctx.print(held, () =>
        held.length === 0
          ? `No ${options.status} approvals`
          : table(
              [
                { heading: "ID" },
                { heading: "WALLET" },
                { heading: "AMOUNT", align: "right" },
                { heading: "CHAIN" },
                { heading: "TO" },
                { heading: "STATUS" },
                { heading: "EXPIRES" },
              ],
              held.map((tx) => [
                tx.id,
                tx.walletId,
                tokenAmount(tx.amount, tx.token),
                tx.chain,
                tx.to,
                tx.status,
                when(tx.expiresAt),
              ]),
            ),
      );
    });
  approvals
    .command("approve <transactionId>")
    .description(
      "approve a held spend (admin): checked against the policy again, then sent; waits for the chain",
    )
    .option("--no-wait", "return once broadcast, without waiting for the confirmation")
    .option(
      "--timeout <seconds>",
      "how long to wait for the confirmation",
      wholeNumber("--timeout", 1, 86_400),
      120,
    )
    .action(async (transactionId: string, options: { wait: boolean; timeout: number }, command: Command) => {
      const ctx = contextOf(command);
      const svc = await ctx.client();
      const approved = await svc.approvals.approve(transactionId);
      const final = options.wait
        ? await waitForConfirmation(ctx, await svc.wallet.get(approved.walletId), approved, options.timeout)
        : approved;
      ctx.print(final, () => `Approved ${final.id}: ${final.status}\n${transactionView(final)}`);
    });
  approvals
    .command("reject <transactionId>")
    .description("reject a held spend (admin): nothing is sent and the daily limit has its room back")
    .action(async (transactionId: string, _options: unknown, command: Command) => {
      const ctx = contextOf(command);
      const rejected = await (await ctx.client()).approvals.reject(transactionId);
      ctx.print(rejected, () => `Rejected ${rejected.id}\n${transactionView(rejected)}`);
    });
}
