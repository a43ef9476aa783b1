import swagger from "@fastify/swagger";
import { jsonSchemaTransform, jsonSchemaTransformObject } from "fastify-type-provider-zod";
import type { App } from "./types.ts";

/** Registers the OpenAPI generator; must run before the routes are added so it sees them all. */
export async function installOpenApi(app: App): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: "3.0.3",
      info: {
        title: "Svc wallet service",
        version: "1.0.0",
        description:
          "Wallets for programmatic agents. Authenticate with `Authorization: Bearer <API key or access token>`.",
      },
      components: { securitySchemes: { bearer: { type: "http", scheme: "bearer" } } },
      security: [{ bearer: [] }],
    },
    transform: jsonSchemaTransform,
    transformObject: jsonSchemaTransformObject,
  });
}

/** Adds `GET /v1/openapi.json` and the human docs page `GET /docs`, both public. */
export function registerDocsRoutes(app: App): void {
  app.get("/v1/openapi.json", { config: { auth: "public" }, schema: { hide: true } }, async () =>
    app.swagger(),
  );
  app.get("/docs", { config: { auth: "public" }, schema: { hide: true } }, async (_request, reply) =>
    reply.type("text/html; charset=utf-8").send(renderDocsPage(app.swagger() as OpenApiDocument)),
  );
}

interface OpenApiOperation {
  summary?: string;
  tags?: string[];
  parameters?: { name: string; in: string; required?: boolean; schema?: unknown }[];
  requestBody?: { content?: Record<string, { schema?: unknown }> };
  responses?: Record<string, { description?: string; content?: Record<string, { schema?: unknown }> }>;
  security?: unknown[];
}
interface OpenApiDocument {
  info: { title: string; description?: string };
  paths: Record<string, Record<string, OpenApiOperation>>;
}

const escapeHtml = (text: string) =>
  text.replace(
    /[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c] ?? c,
  );

/** A self-contained page (no scripts, no external assets) listing every operation and its schemas. */
function renderDocsPage(doc: OpenApiDocument): string {
  const sections = Object.entries(doc.paths).flatMap(([path, operations]) =>
    Object.entries(operations).map(([method, op]) => {
      const body = op.requestBody?.content?.["application/json"]?.schema;
      const params = (op.parameters ?? []).map((p) => `${p.name} (${p.in}${p.required ? ", required" : ""})`);
      const responses = Object.entries(op.responses ?? {}).map(
        ([status, r]) => `${status} ${r.description ?? ""}`,
      );
      const isPublic = Array.isArray(op.security) && op.security.length === 0;
      return `<section><h2><code>${method.toUpperCase()} ${escapeHtml(path)}</code></h2>
<p>${escapeHtml(op.summary ?? "")}${isPublic ? " <em>(no credential)</em>" : ""}</p>
${params.length ? `<p>Parameters: ${escapeHtml(params.join(", "))}</p>` : ""}
${body ? `<details><summary>Request body</summary><pre>${escapeHtml(JSON.stringify(body, null, 2))}</pre></details>` : ""}
<p>Responses: ${escapeHtml(responses.join(" · "))}</p></section>`;
    }),
  );
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(doc.info.title)}</title>
<style>body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}
section{border-top:1px solid #ddd;padding:.5rem 0}h2{font-size:1rem}pre{background:#f6f6f6;padding:.5rem;overflow:auto}</style>
</head><body><h1>${escapeHtml(doc.info.title)}</h1><p>${escapeHtml(doc.info.description ?? "")}</p>
<p>Machine-readable: <a href="/v1/openapi.json">/v1/openapi.json</a> (OpenAPI 3).</p>
${sections.join("\n")}</body></html>`;
}
