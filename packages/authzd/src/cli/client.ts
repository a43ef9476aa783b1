import { type Config, cliDaemonUrl } from "../internal/config.ts";
import { type HomePaths, readDaemonInfo, readOperatorToken } from "../internal/home.ts";

/** Thrown for a failed CLI call; the message is fit for the terminal (no tokens). */
export class CliError extends Error {
  override readonly name = "CliError";
}

/**
 * Calls the running daemon as the operator: URL from `AUTHZD_URL`, else the home's `daemon.json`,
 * else `AUTHZD_HOST`/`AUTHZD_PORT`; token from `$AUTHZD_HOME/operator.token`.
 */
export async function operatorRequest(
  config: Config,
  paths: HomePaths,
  method: "GET" | "POST",
  path: string,
  body?: unknown,
): Promise<unknown> {
  const base = cliDaemonUrl() ?? readDaemonInfo(paths)?.url ?? `http://${config.host}:${config.port}`;
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
