/**
 * Vitest global setup: builds `svc` once for the run, so the ~90 processes the tests start each load one
 * JavaScript file instead of tsx compiling the CLI's and the SDK's sources in every one (0.3–0.5 s each).
 * esbuild (what tsx compiles with) bundles `src/main.ts`, the module `bin/svc.js` imports, with the SDK's
 * sources through the package's tsconfig, as tsx reads them; the dependencies stay imports. The build is
 * written inside the package's node_modules, so it finds the dependencies the sources find.
 *
 * Tests run the build through {@link svc} in support.ts; one test runs `bin/svc.js` itself.
 */
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import type { TestProject } from "vitest/node";

declare module "vitest" {
  export interface ProvidedContext {
    /** The file `svc` was built into for this run: `node <file> args…` runs the CLI. */
    svcBuild: string;
  }
}

const PACKAGE_DIR = fileURLToPath(new URL("..", import.meta.url));

export default async function buildCli(project: TestProject): Promise<() => void> {
  mkdirSync(join(PACKAGE_DIR, "node_modules"), { recursive: true });
  const dir = mkdtempSync(join(PACKAGE_DIR, "node_modules", ".svc-build-"));
  const outfile = join(dir, "svc.mjs");
  await build({
    entryPoints: [join(PACKAGE_DIR, "src", "main.ts")],
    tsconfig: join(PACKAGE_DIR, "tsconfig.json"),
    outfile,
    bundle: true,
    packages: "external",
    platform: "node",
    format: "esm",
    target: "node20",
    logLevel: "warning",
  });
  project.provide("svcBuild", outfile);
  return () => rmSync(dir, { recursive: true, force: true });
}
