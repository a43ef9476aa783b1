/**
 * Human output: aligned tables, amounts with their symbols, USD with a dollar sign, and a spinner on a
 * terminal. Machine output (`--json`) bypasses all of this.
 */

/**
 * Text from elsewhere (the service, a paid resource) as a terminal should show it: control characters
 * (escape sequences, carriage returns, backspaces) and the invisible ones that reorder text (bidirectional
 * overrides) written as `\u001b`, so a wallet name or a resource's reason cannot recolour the terminal,
 * move its cursor or hide what follows. `keepLines` leaves newlines and tabs as they are.
 * @example
 * printable("evil\u001b[31m"); // "evil\\u001b[31m"
 */
export function printable(text: string, options: { keepLines?: boolean } = {}): string {
  return text.replace(
    options.keepLines ? UNPRINTABLE_BUT_LINES : UNPRINTABLE,
    (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
}
const UNPRINTABLE = /[\p{Cc}\u200e\u200f\u202a-\u202e\u2066-\u2069]/gu;
const UNPRINTABLE_BUT_LINES = /[^\P{Cc}\n\t]|[\u200e\u200f\u202a-\u202e\u2066-\u2069]/gu;

/** A column of {@link table}: its heading, and whether its values line up on the right (numbers). */
export interface Column {
  heading: string;
  align?: "left" | "right";
}

/**
 * Rows under headings, columns two spaces apart, each as wide as its widest cell; no trailing spaces.
 * @example
 * table([{ heading: "TOKEN" }, { heading: "AMOUNT", align: "right" }], [["USDC", "100"]]);
 * // "TOKEN  AMOUNT\nUSDC      100"
 */
export function table(columns: Column[], cells: string[][]): string {
  const rows = cells.map((row) => row.map((cell) => printable(cell)));
  const widths = columns.map((column, index) =>
    Math.max(column.heading.length, ...rows.map((row) => (row[index] ?? "").length)),
  );
  const line = (cells: string[]): string =>
    cells
      .map((cell, index) => {
        const width = widths[index] ?? 0;
        return columns[index]?.align === "right" ? cell.padStart(width) : cell.padEnd(width);
      })
      .join("  ")
      .trimEnd();
  return [line(columns.map((column) => column.heading)), ...rows.map(line)].join("\n");
}

/**
 * Labelled values, the labels padded to one width.
 * @example
 * fields([["id", "wal_…"], ["status", "active"]]); // "id      wal_…\nstatus  active"
 */
export function fields(pairs: [string, string][]): string {
  const width = Math.max(...pairs.map(([label]) => label.length));
  return pairs.map(([label, value]) => `${label.padEnd(width)}  ${printable(value)}`.trimEnd()).join("\n");
}

/**
 * A token amount with its symbol.
 * @example
 * tokenAmount("1.5", "USDC"); // "1.5 USDC"
 */
export function tokenAmount(amount: string, token: string): string {
  return `${amount} ${token}`;
}

/**
 * A USD decimal string with a dollar sign and at least two decimals; `null` is `none` (no bound).
 * @example
 * usd("10"); // "$10.00"
 * usd("0.015"); // "$0.015"
 * usd(null); // "none"
 */
export function usd(value: string | null | undefined): string {
  if (value === null || value === undefined) return "none";
  const [whole = "0", fraction = ""] = value.split(".");
  return `$${whole}.${fraction.padEnd(2, "0")}`;
}

/**
 * An ISO timestamp as `2026-11-23 01:20:03Z` (seconds are enough on a terminal; `--json` keeps all).
 * @example
 * when("2026-11-23T01:20:03.512Z"); // "2026-11-23 01:20:03Z"
 */
export function when(iso: string | null | undefined): string {
  if (!iso) return "never";
  return iso.replace("T", " ").replace(/\.\d+Z$/, "Z");
}

const FRAMES = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

/** A spinner on stderr; the no-op kind when stderr is not a terminal or output is JSON. */
export interface Spinner {
  /** Changes the text beside the spinner. */
  update(text: string): void;
  /** Stops and erases the spinner line. */
  stop(): void;
}

/**
 * Starts a spinner with `text` on stderr when it is a terminal and `enabled`; otherwise one that does
 * nothing, so scripts and pipes see no control characters.
 * @example
 * const spinner = startSpinner("Confirming tx_… on base", !json);
 * try { await waitForIt(); } finally { spinner.stop(); }
 */
export function startSpinner(text: string, enabled: boolean): Spinner {
  const stream = process.stderr;
  if (!enabled || !stream.isTTY) return { update: () => {}, stop: () => {} };
  let current = text;
  let frame = 0;
  const draw = (): void => {
    stream.write(`\r\x1b[K${FRAMES[frame % FRAMES.length]} ${current}`);
    frame += 1;
  };
  draw();
  const timer = setInterval(draw, 80);
  return {
    update: (next) => {
      current = next;
      draw();
    },
    stop: () => {
      clearInterval(timer);
      stream.write("\r\x1b[K");
    },
  };
}
