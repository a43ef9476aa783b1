/**
 * Routing on the URL's hash (`#/wallets/wal_…`): the service serves one page at `/`, and every view has a
 * link that survives a reload.
 */
import { type MouseEvent, type ReactNode, useSyncExternalStore } from "react";

function currentPath(): string {
  const hash = window.location.hash.replace(/^#/, "");
  return hash.startsWith("/") ? hash : "/";
}

/** The path after `#`, re-rendering when it changes. */
export function usePath(): string {
  return useSyncExternalStore((listener) => {
    window.addEventListener("hashchange", listener);
    return () => window.removeEventListener("hashchange", listener);
  }, currentPath);
}

export function navigate(path: string): void {
  window.location.hash = path;
}

/** Matches `path` against a pattern like `/wallets/:id`; the named segments, or null. */
export function match(pattern: string, path: string): Record<string, string> | null {
  const want = pattern.split("/");
  const got = path.split("?")[0]?.split("/") ?? [];
  if (want.length !== got.length) return null;
  const params: Record<string, string> = {};
  for (const [i, part] of want.entries()) {
    const value = got[i] as string;
    if (part.startsWith(":")) {
      // A malformed escape (`%E0%A4%A`, in a link anyone can send) matches nothing: the page says not found.
      try {
        params[part.slice(1)] = decodeURIComponent(value);
      } catch {
        return null;
      }
    } else if (part !== value) return null;
  }
  return params;
}

export function Link(props: { to: string; children: ReactNode; className?: string; current?: boolean }) {
  const onClick = (event: MouseEvent<HTMLAnchorElement>) => {
    if (event.metaKey || event.ctrlKey || event.shiftKey || event.button !== 0) return;
    event.preventDefault();
    navigate(props.to);
  };
  return (
    <a
      href={`#${props.to}`}
      className={props.className}
      aria-current={props.current ? "page" : undefined}
      onClick={onClick}
    >
      {props.children}
    </a>
  );
}
