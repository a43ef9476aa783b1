#!/usr/bin/env node
// Runs the TypeScript sources directly: the package ships no build step, like the rest of the monorepo.
import { register } from "tsx/esm/api";

register();
await import("../src/cli.ts");
