import readline from "node:readline";

/**
 * Reads one line: asked on the terminal (not echoed unless `echo`), or the first line of stdin when stdin
 * is not a terminal (`echo $PASSWORD | svc login --email …`) or `fromStdin` says so (`--password-stdin`).
 * Empty when stdin is closed.
 * @example
 * const password = await readSecret("Password: ", false);
 */
export async function readSecret(
  question: string,
  echo: boolean,
  options: { fromStdin?: boolean } = {},
): Promise<string> {
  const input = process.stdin;
  if (!input.isTTY || options.fromStdin) {
    const lines = readline.createInterface({ input, terminal: false });
    for await (const line of lines) {
      lines.close();
      return line.trim();
    }
    return "";
  }
  if (echo) {
    const lines = readline.createInterface({ input, output: process.stderr });
    try {
      return (await new Promise<string>((resolve) => lines.question(question, resolve))).trim();
    } finally {
      lines.close();
    }
  }
  process.stderr.write(question);
  input.setRawMode(true);
  input.resume();
  input.setEncoding("utf8");
  let typed = "";
  try {
    return await new Promise<string>((resolve, reject) => {
      const onData = (chunk: string): void => {
        for (const char of chunk) {
          if (char === "\r" || char === "\n") {
            input.off("data", onData);
            resolve(typed.trim());
            return;
          }
          if (char === "\u0003") {
            input.off("data", onData);
            reject(new Error("cancelled"));
            return;
          }
          if (char === "\u007f") typed = typed.slice(0, -1);
          else typed += char;
        }
      };
      input.on("data", onData);
    });
  } finally {
    input.setRawMode(false);
    input.pause();
    process.stderr.write("\n");
  }
}
