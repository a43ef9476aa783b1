/** Name and version reported by `GET /version`; kept equal to package.json by a test. */
export const VERSION = { name: "authzd", version: "0.1.0" } as const;
