import { isIP } from "node:net";
import { errors } from "../internal/errors.ts";
import type { App } from "./types.ts";

/**
 * Whether a request may be served under the host it names. The check defeats DNS rebinding: a page on
 * `attacker.example` whose name is made to resolve to 127.0.0.1 can send requests to a service bound to
 * loopback, and its browser treats the answers as the page's own; but those requests name
 * `attacker.example` as their host. A host given as an address cannot be rebound, nor can `localhost` and
 * `*.localhost` (browsers resolve them to loopback themselves); any other name must be one the operator
 * listed. A request naming no host (HTTP/1.0) comes from no browser and is served.
 */
export function isHostAllowed(host: string, allowed: readonly string[] | "any"): boolean {
  if (allowed === "any" || host === "") return true;
  // A host and a port, nothing more: the URL parser below would read `evil@127.0.0.1` or `127.0.0.1/x` as
  // the address they end or begin with.
  if (/[@/\\?#\s]/.test(host)) return false;
  let hostname: string;
  try {
    // The URL parser reads the port off and spells the name as a browser does (lower case, IPv4 normalized);
    // a fully qualified name's final dot names the same host.
    hostname = new URL(`http://${host}`).hostname.replace(/\.$/, "");
  } catch {
    return false;
  }
  if (isIP(hostname.replace(/^\[(.*)\]$/, "$1")) !== 0) return true;
  if (hostname === "localhost" || hostname.endsWith(".localhost")) return true;
  return allowed.includes(hostname);
}

/**
 * Refuses, before anything else runs, a request whose host is not one the service answers to. From a trusted
 * proxy's address both hosts are judged, the `Host` the connection named and the `X-Forwarded-Host` Fastify
 * reads as the request's host: a browser on the proxy's machine reaching the service directly (a rebound page
 * is same-origin to it) sends an `X-Forwarded-Host` of its choosing, but names the attacker's host in `Host`.
 */
export function installHostCheck(app: App, allowed: readonly string[] | "any"): void {
  if (allowed === "any") return;
  app.addHook("onRequest", async (request) => {
    const connectionHost = request.raw.headers.host ?? "";
    if (!isHostAllowed(connectionHost, allowed) || !isHostAllowed(request.host, allowed))
      throw errors.hostNotAllowed();
  });
}
