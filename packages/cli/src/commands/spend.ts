import type { X402FetchInit } from "@svc/sdk";
import type { Command } from "commander";
import { type Context, waitForConfirmation } from "../context.ts";
import { CliError, EXIT, usage } from "../failure.ts";
import { printable, startSpinner, table, tokenAmount } from "../output.ts";
import { wholeNumber } from "../parse.ts";
import { transactionView } from "../views.ts";
import { chainOf } from "./wallets.ts";

const TIMEOUT_OPTION = ["--timeout <seconds>", "how long to wait for the confirmation", "120"] as const;

/**
 * `svc send` and `svc pay`.
 * @example
 * addSpendCommands(program, contextOf);
 */
export function addSpendCommands(program: Command, contextOf: (command: Command) => Context): void {
  program
    .command("send <walletId> <to> <amount>")
    .description("send tokens within the wallet's policy and wait until the chain confirms them")
    .option("--token <symbol>", "USDC, ETH, SOL, …", "USDC")
    .option("--chain <chain>", "the chain (default: the wallet's only chain)")
    .option("--no-wait", "return once broadcast (status pending), without waiting for the confirmation")
    .option(TIMEOUT_OPTION[0], TIMEOUT_OPTION[1], wholeNumber("--timeout", 1, 86_400), 120)
    .option("--idempotency-key <key>", "repeat a send safely: the same key never pays twice")
    .action(
      async (
        walletId: string,
        to: string,
        amount: string,
        options: { token: string; chain?: string; wait: boolean; timeout: number; idempotencyKey?: string },
        command: Command,
      ) => {
        const ctx = contextOf(command);
        const svc = await ctx.client();
        const wallet = await svc.wallet.get(walletId);
        const chain = chainOf(wallet.chains, options.chain);
        const spinner = startSpinner(
          `Sending ${tokenAmount(amount, options.token)} on ${chain} to ${to}`,
          !ctx.json,
        );
        const sent = await wallet
          .send(
            { to, amount, token: options.token, chain },
            options.idempotencyKey === undefined ? {} : { idempotencyKey: options.idempotencyKey },
          )
          .finally(() => spinner.stop());
        if (sent.status === "pending_approval") {
          ctx.print(
            sent,
            () =>
              `Held for approval (above the policy's approvalAbove): nothing is signed until an admin runs\n  svc approvals approve ${sent.id}\n${transactionView(sent)}`,
          );
          return;
        }
        const final = options.wait ? await waitForConfirmation(ctx, wallet, sent, options.timeout) : sent;
        ctx.print(final, () => {
          const headline =
            final.status === "confirmed"
              ? `Sent ${tokenAmount(final.amount, final.token)} to ${final.to} on ${final.chain}: confirmed`
              : `Broadcast ${tokenAmount(final.amount, final.token)} to ${final.to} on ${final.chain}: ${final.status}`;
          return `${headline}\n${transactionView(final)}`;
        });
      },
    );

  program
    .command("pay <walletId> <url>")
    .description("fetch a URL, paying its HTTP 402 (x402) from the wallet within its policy; prints the body")
    .option("--max-amount <amount>", "pay at most this much, in whole tokens (e.g. 0.05); dearer is refused")
    .option("--chain <chain>", "pay only on this chain of the wallet")
    .option("--method <method>", "HTTP method", "GET")
    .option("--body <text>", "request body (JSON is sent as JSON)")
    .option(
      "-H, --header <header>",
      "request header 'name: value' (repeatable)",
      (value: string, previous: string[]) => [...previous, value],
      [] as string[],
    )
    .action(
      async (
        walletId: string,
        url: string,
        options: { maxAmount?: string; chain?: string; method: string; body?: string; header: string[] },
        command: Command,
      ) => {
        const ctx = contextOf(command);
        const headers: Record<string, string> = {};
        for (const header of options.header) {
          const colon = header.indexOf(":");
          if (colon < 1) throw usage(`--header must look like 'name: value', not ${JSON.stringify(header)}`);
          headers[header.slice(0, colon).trim()] = header.slice(colon + 1).trim();
        }
        const init: X402FetchInit = {
          method: options.method.toUpperCase() as NonNullable<X402FetchInit["method"]>,
          ...(Object.keys(headers).length === 0 ? {} : { headers }),
          ...(options.body === undefined ? {} : { body: jsonOrText(options.body) }),
          ...(options.chain === undefined ? {} : { chain: options.chain }),
          ...(options.maxAmount === undefined ? {} : { maxAmount: options.maxAmount }),
        };
        const wallet = await (await ctx.client()).wallet.get(walletId);
        const spinner = startSpinner(`Fetching ${url}`, !ctx.json);
        const response = await wallet.fetch(url, init).finally(() => spinner.stop());
        const text = await response.text();
        const body = (response.headers.get("content-type") ?? "").includes("json") ? jsonOrText(text) : text;
        const paid = response.transaction;
        if (ctx.json) {
          ctx.print(
            {
              status: response.status,
              body,
              amountCharged: response.amountCharged ?? null,
              receipt: response.receipt ?? null,
              transaction: paid ?? null,
            },
            () => "",
          );
        } else {
          // The body alone on stdout (so it can be piped); what was paid on stderr.
          process.stderr.write(
            printable(
              paid
                ? `Paid ${tokenAmount(response.amountCharged ?? paid.amount, paid.token)} on ${paid.chain} (${paid.id}, ${paid.status}${paid.txHash ? `, ${paid.txHash}` : ""})\n`
                : `Nothing paid (HTTP ${response.status})\n`,
              { keepLines: true },
            ),
          );
          const shown =
            typeof body === "string"
              ? body.endsWith("\n")
                ? body
                : `${body}\n`
              : `${JSON.stringify(body, null, 2)}\n`;
          // Piped, the resource's body goes on as it came; on a terminal, it may not drive the terminal.
          process.stdout.write(process.stdout.isTTY ? printable(shown, { keepLines: true }) : shown);
        }
        if (response.status >= 400) {
          throw new CliError(`${url} answered HTTP ${response.status}`, EXIT.failed, {
            status: response.status,
          });
        }
      },
    );

  program
    .command("services")
    .description("x402 resources the service's facilitator lists, to fetch with svc pay")
    .option("--query <text>", "only those with this text in their URL, name, description or tags")
    .option("--limit <n>", "at most this many (1 to 100)", wholeNumber("--limit", 1, 100))
    .action(async (options: { query?: string; limit?: number }, command: Command) => {
      const ctx = contextOf(command);
      const svc = await ctx.client();
      const services = await svc.x402.discover({
        ...(options.query === undefined ? {} : { query: options.query }),
        ...(options.limit === undefined ? {} : { limit: options.limit }),
      });
      ctx.print(services, () =>
        services.length === 0
          ? "No x402 services listed"
          : table(
              [{ heading: "RESOURCE" }, { heading: "NAME" }, { heading: "DESCRIPTION" }],
              services.map((service) => [
                service.resource,
                service.serviceName ?? "",
                service.description ?? "",
              ]),
            ),
      );
    });
}

function jsonOrText(text: string): string | Record<string, unknown> | unknown[] {
  try {
    const parsed: unknown = JSON.parse(text);
    if (parsed !== null && typeof parsed === "object") return parsed as Record<string, unknown>;
  } catch {
    // not JSON: sent and shown as text
  }
  return text;
}
