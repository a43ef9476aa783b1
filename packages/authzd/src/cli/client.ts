import { cliDaemonUrl } from "../internal/config.ts";
import { type HomePaths, readOperatorToken, runningDaemon } from "../internal/home.ts";

/** Thrown for a failed CLI call; the message is fit for the terminal (no tokens). */
export class CliError extends Error {
  override readonly name = "CliError";
}

/**
 * Calls the running daemon as the operator: URL from `AUTHZD_URL`, else from the home's `daemon.json`
 * while the daemon that wrote it still holds the home; token from `$AUTHZD_HOME/operator.token`. With
 * neither, nothing is sent: the token goes to no address a daemon of this home does not listen on.
 */
export async function operatorRequest(
  paths: HomePaths,
  method: "GET" | "POST",
  path: string,
  body?: unknown,
): Promise<unknown> {
  const base = cliDaemonUrl() ?? runningDaemon(paths)?.url;
  if (base === undefined) {
    throw new CliError(
      `no daemon is running on ${paths.home}: start it with \`npx authzd serve\`, or set AUTHZD_URL to where it listens`,
    );
  }
  let token: string;
  try {
    token = readOperatorToken(paths);
  } catch {
    throw new CliError(
      `cannot read the operator token at ${paths.operatorToken}; has the daemon been started?`,
    );
  }
  let response: Response;
  try {
    response = await fetch(`${base}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body === undefined ? {} : { "content-type": "application/json" }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  } catch (error) {
    throw new CliError(`cannot reach authzd at ${base} (${(error as Error).message}); is it running?`);
  }
  const payload = (await response.json().catch(() => null)) as { error?: unknown } | null;
  if (!response.ok) {
    const message = typeof payload?.error === "string" ? payload.error : `HTTP ${response.status}`;
    throw new CliError(`authzd: ${message} (HTTP ${response.status})`);
  }
  return payload;
}
