import { randomBytes } from "node:crypto";
import { request as httpRequest } from "node:http";
import { Writable } from "node:stream";

/**
 * What tests and benchmarks use to talk to a running service over real sockets. No test-runner imports
 * here, so the benchmarks can use it too.
 */

/** Log lines the service wrote, kept for assertions (for instance, that no secret was logged). */
export class LogCapture extends Writable {
  readonly lines: string[] = [];
  override _write(chunk: Buffer, _encoding: string, done: () => void): void {
    this.lines.push(...chunk.toString("utf8").split("\n").filter(Boolean));
    done();
  }
  text(): string {
    return this.lines.join("\n");
  }
}

export interface ApiResponse<T = any> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

/** A thin HTTP client over real sockets, as any client of the API would use. */
export class ApiClient {
  constructor(readonly baseUrl: string) {}

  async request<T = any>(
    method: string,
    path: string,
    options: { token?: string; body?: unknown; rawBody?: string; headers?: Record<string, string> } = {},
  ): Promise<ApiResponse<T>> {
    const headers: Record<string, string> = { ...options.headers };
    if (options.token) headers.authorization = `Bearer ${options.token}`;
    let body: string | undefined;
    if (options.rawBody !== undefined) body = options.rawBody;
    else if (options.body !== undefined) {
      body = JSON.stringify(options.body);
      headers["content-type"] ??= "application/json";
    }
    const response = await fetch(this.baseUrl + path, {
      method,
      headers,
      ...(body !== undefined ? { body } : {}),
    });
    const text = await response.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {}
    return { status: response.status, headers: response.headers, body: parsed as T, text };
  }

  get<T = any>(path: string, token?: string) {
    return this.request<T>("GET", path, token ? { token } : {});
  }
  post<T = any>(path: string, body: unknown, token?: string, headers?: Record<string, string>) {
    return this.request<T>("POST", path, {
      body,
      ...(token ? { token } : {}),
      ...(headers ? { headers } : {}),
    });
  }
  delete<T = any>(path: string, token?: string) {
    return this.request<T>("DELETE", path, token ? { token } : {});
  }
}

let accountCounter = 0;

/** Registers an account, logs in and creates an API key: what every test of an authenticated route needs. */
export async function seedAccount(
  api: ApiClient,
  label = "agent",
): Promise<{
  email: string;
  password: string;
  userId: string;
  accessToken: string;
  apiKey: string;
  apiKeyId: string;
}> {
  const email = `${label}-${Date.now()}-${accountCounter++}-${randomBytes(3).toString("hex")}@example.com`;
  const password = `pw-${randomBytes(12).toString("hex")}`;
  const registered = await api.post("/v1/auth/register", { email, password });
  if (registered.status !== 201) throw new Error(`register failed: ${registered.text}`);
  const login = await api.post("/v1/auth/login", { email, password });
  if (login.status !== 200) throw new Error(`login failed: ${login.text}`);
  // The owner's own key: admin, like the access token it was made with.
  const key = await api.post("/v1/api-keys", { name: "test", role: "admin" }, login.body.accessToken);
  if (key.status !== 201) throw new Error(`api key failed: ${key.text}`);
  return {
    email,
    password,
    userId: registered.body.userId,
    accessToken: login.body.accessToken,
    apiKey: key.body.key,
    apiKeyId: key.body.id,
  };
}

/** A request that sends its headers and the first byte of its body now, and the rest when `finish` is called. */
export function slowRequest(baseUrl: string, method: string, path: string, token: string, body: unknown) {
  const text = JSON.stringify(body);
  const url = new URL(baseUrl);
  const request = httpRequest({
    host: url.hostname,
    port: url.port,
    path,
    method,
    headers: {
      authorization: `Bearer ${token}`,
      "content-type": "application/json",
      "content-length": Buffer.byteLength(text),
    },
  });
  const answer = new Promise<{ status: number; text: string }>((resolve, reject) => {
    request.on("response", (response) => {
      let received = "";
      response.on("data", (chunk) => (received += chunk));
      response.on("end", () => resolve({ status: response.statusCode ?? 0, text: received }));
    });
    request.on("error", reject);
  });
  request.flushHeaders();
  request.write(text.slice(0, 1));
  return {
    finish: () => {
      request.end(text.slice(1));
      return answer;
    },
  };
}

/**
 * A request exactly as written, which `fetch` will not send: the path with no `..`, `.` or `//` resolved,
 * and any `Host` header.
 */
export function requestAsSent(
  baseUrl: string,
  request: { method?: string; path: string; headers?: Record<string, string>; body?: string },
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; text: string }> {
  const { hostname, port } = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    httpRequest(
      { host: hostname, port, path: request.path, method: request.method ?? "GET", headers: request.headers },
      (response) => {
        let text = "";
        response.setEncoding("utf8");
        response.on("data", (chunk: string) => (text += chunk));
        response.on("end", () =>
          resolve({ status: response.statusCode ?? 0, headers: response.headers, text }),
        );
      },
    )
      .on("error", reject)
      .end(request.body);
  });
}
