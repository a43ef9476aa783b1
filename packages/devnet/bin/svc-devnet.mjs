#!/usr/bin/env node
// Runs the TypeScript CLI through tsx's loader: the package ships sources only.
import { register } from "tsx/esm/api";

register();
await import("../src/cli.ts");
