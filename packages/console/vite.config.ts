import { fileURLToPath } from "node:url";
import react from "@vitejs/plugin-react";
import { defineConfig } from "vite";

/**
 * The console builds into `dist/`, which the service serves at `/`. The SDK is taken from its sources in this
 * repository (its package entry is its build), so no SDK build is needed first.
 */
export default defineConfig({
  plugins: [react()],
  resolve: { alias: { "@svc/sdk": fileURLToPath(new URL("../sdk/src/index.ts", import.meta.url)) } },
  build: { outDir: "dist", emptyOutDir: true, sourcemap: true, target: "es2022" },
  // `npm run dev` proxies the API to a service started with `npm start`: `SVC_URL` when set, else the local
  // service on `PORT` (8080 unless set), as `npm start` reads it.
  server: { proxy: { "/v1": process.env.SVC_URL || `http://127.0.0.1:${process.env.PORT || 8080}` } },
});
