import type { Command } from "commander";
import type { Context } from "../context.ts";
import { usage } from "../failure.ts";
import { type PolicyOptions, policyFromOptions } from "../parse.ts";
import { policyView } from "../views.ts";
import { withPolicyOptions } from "./policy-options.ts";

/**
 * `svc policy show|set|pause|resume`.
 * @example
 * addPolicyCommands(program, contextOf);
 */
export function addPolicyCommands(program: Command, contextOf: (command: Command) => Context): void {
  const policy = program.command("policy").description("a wallet's spending policy");
  policy
    .command("show <walletId>")
    .description("the policy as the service holds it")
    .action(async (walletId: string, _options: unknown, command: Command) => {
      const ctx = contextOf(command);
      const shown = await (await (await ctx.client()).wallet.get(walletId)).policy.get();
      ctx.print(shown, () => policyView(shown));
    });
  withPolicyOptions(
    policy
      .command("set <walletId>")
      .description(
        "change any of the bounds (loosening needs an admin credential; an agent key may only tighten)",
      ),
  ).action(async (walletId: string, options: PolicyOptions, command: Command) => {
    const ctx = contextOf(command);
    const change = policyFromOptions(options);
    if (change === undefined) {
      throw usage(
        "policy set needs at least one of --max-per-tx, --daily-limit, --alert-above, --approval-above, --whitelist, --[no-]require-spend-authorization",
      );
    }
    const updated = await (await (await ctx.client()).wallet.get(walletId)).policy.update(change);
    ctx.print(updated, () => policyView(updated));
  });
  policy
    .command("pause <walletId>")
    .description("stop every spend from the wallet")
    .action(async (walletId: string, _options: unknown, command: Command) => {
      const ctx = contextOf(command);
      const paused = await (await (await ctx.client()).wallet.get(walletId)).policy.pause();
      ctx.print(paused, () => `Paused ${walletId}: nothing is spent until svc policy resume ${walletId}`);
    });
  policy
    .command("resume <walletId>")
    .description("let the wallet spend again (admin)")
    .action(async (walletId: string, _options: unknown, command: Command) => {
      const ctx = contextOf(command);
      const resumed = await (await (await ctx.client()).wallet.get(walletId)).policy.resume();
      ctx.print(resumed, () => `Resumed ${walletId}: spends within the policy go through again`);
    });
}
