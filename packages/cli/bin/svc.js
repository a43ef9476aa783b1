#!/usr/bin/env node
// Runs the TypeScript CLI through tsx's loader (the package ships sources). The tsconfig maps `@svc/sdk` to
// the SDK's sources in this repository, so no build is needed.
import { fileURLToPath } from "node:url";
import { register } from "tsx/esm/api";

register({ tsconfig: fileURLToPath(new URL("../tsconfig.json", import.meta.url)) });
await import("../src/main.ts");
