/**
 * The owner's console (packages/console), served from its build at `/`: `index.html`, its hashed assets under
 * `/assets/`, and the icon; all public (the console logs in through the API). Every response carries a
 * Content-Security-Policy that lets the page load and call nothing but this origin.
 */
import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import fastifyStatic from "@fastify/static";
import type { FastifyReply } from "fastify";
import type { App } from "./types.ts";

export const CONSOLE_CSP = [
  "default-src 'none'",
  "base-uri 'none'",
  "connect-src 'self'",
  "font-src 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "img-src 'self' data:",
  "manifest-src 'self'",
  "object-src 'none'",
  "script-src 'self'",
  "script-src-attr 'none'",
  "style-src 'self'",
].join("; ");

/** Where the console's build is: `dist/` of the `@svc/console` package, or null when it is not installed. */
export function consoleBuildDir(): string | null {
  try {
    const manifest = createRequire(import.meta.url).resolve("@svc/console/package.json");
    return path.join(path.dirname(manifest), "dist");
  } catch {
    return null;
  }
}

function secureHeaders(reply: FastifyReply): FastifyReply {
  return reply
    .header("content-security-policy", CONSOLE_CSP)
    .header("x-content-type-options", "nosniff")
    .header("referrer-policy", "no-referrer");
}

const ASSET_NAME = /^[A-Za-z0-9_-][A-Za-z0-9._-]*$/;

const PUBLIC = { config: { auth: "public" as const }, schema: { hide: true } };

/**
 * Serves the console's build at `/` (or, when it is not built, a 503 that says how to build it).
 * @example await registerConsole(app); // GET / → the console
 */
export async function registerConsole(app: App, buildDir: string | null = consoleBuildDir()): Promise<void> {
  const built = buildDir !== null && fs.existsSync(path.join(buildDir, "index.html"));
  if (!built) {
    app.get("/", PUBLIC, async (_request, reply) =>
      secureHeaders(reply)
        .code(503)
        .type("text/plain; charset=utf-8")
        .send(
          "The console is not built. npm install builds it; to build it again: npm run build -w @svc/console\n",
        ),
    );
    return;
  }
  await app.register(async (scope) => {
    await scope.register(fastifyStatic, { root: buildDir, serve: false, index: false, cacheControl: false });
    scope.get("/", PUBLIC, async (_request, reply) =>
      secureHeaders(reply).header("cache-control", "no-cache").sendFile("index.html"),
    );
    scope.get("/favicon.svg", PUBLIC, async (_request, reply) =>
      secureHeaders(reply).header("cache-control", "public, max-age=3600").sendFile("favicon.svg"),
    );
    // File names carry their content's hash: cached for good. The build's assets are one flat directory:
    // any other name (a dot first, a separator, after decoding) is not one of them.
    scope.get("/assets/*", PUBLIC, async (request, reply) => {
      const file = (request.params as { "*": string })["*"];
      if (!ASSET_NAME.test(file)) return reply.callNotFound();
      return secureHeaders(reply)
        .header("cache-control", "public, max-age=31536000, immutable")
        .sendFile(file, path.join(buildDir, "assets"));
    });
  });
}
