/** Vitest global setup: builds the console once, so the browser tests drive the sources as they are now. */
import { fileURLToPath } from "node:url";
import { build } from "vite";

export default async function buildConsole(): Promise<void> {
  await build({ root: fileURLToPath(new URL("..", import.meta.url)), logLevel: "warn" });
}
