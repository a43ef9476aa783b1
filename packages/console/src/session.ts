/**
 * The signed-in owner: the login access token (an admin credential for an hour) kept in the tab's
 * sessionStorage, so a reload keeps the session and other tabs do not share it. Closing the tab does not
 * end the token: a browser restores a reopened tab's sessionStorage, and the token lives out its hour;
 * logging out ends it at the service. Beside it, in localStorage,
 * only each email's login device token (no credential): the service counts this browser's logins by it,
 * so others guessing the owner's password cannot keep the owner out.
 */
import { SvcWallet } from "@svc/sdk";
import { useSyncExternalStore } from "react";

const STORAGE_KEY = "svc.console.session";
const DEVICE_TOKENS_KEY = "svc.console.login-devices";

export interface Session {
  email: string;
  accessToken: string;
  /** ISO time after which the token is refused. */
  expiresAt: string;
}

/** Why the owner is on the login page again, shown there once. */
let endedBecause: string | undefined;
const listeners = new Set<() => void>();

function read(): Session | null {
  const raw = sessionStorage.getItem(STORAGE_KEY);
  if (!raw) return null;
  try {
    const session = JSON.parse(raw) as Session;
    return Date.parse(session.expiresAt) > Date.now() ? session : null;
  } catch {
    return null;
  }
}

let current: Session | null = read();

function publish(next: Session | null): void {
  current = next;
  if (next) sessionStorage.setItem(STORAGE_KEY, JSON.stringify(next));
  else sessionStorage.removeItem(STORAGE_KEY);
  for (const listener of listeners) listener();
}

/** The service's API, on this page's origin. */
export const API_BASE_URL = `${window.location.origin}/v1`;

/** A client without a credential: register and log in. */
export const publicClient = new SvcWallet({ baseUrl: API_BASE_URL, maxRetries: 0 });

/** The device tokens of this browser's logins, by email as the service compares them (trimmed, lower case). */
function deviceTokens(): Record<string, string> {
  try {
    const stored: unknown = JSON.parse(localStorage.getItem(DEVICE_TOKENS_KEY) ?? "{}");
    return typeof stored === "object" && stored !== null ? (stored as Record<string, string>) : {};
  } catch {
    return {};
  }
}

/** Logs in, as the device this browser was at its last login to the email, and starts the session. */
export async function signIn(email: string, password: string): Promise<void> {
  const byEmail = email.trim().toLowerCase();
  const known = deviceTokens()[byEmail];
  const { accessToken, expiresIn, deviceToken } = await publicClient.auth.login({
    email,
    password,
    ...(typeof known === "string" ? { deviceToken: known } : {}),
  });
  localStorage.setItem(DEVICE_TOKENS_KEY, JSON.stringify({ ...deviceTokens(), [byEmail]: deviceToken }));
  endedBecause = undefined;
  publish({ email, accessToken, expiresAt: new Date(Date.now() + expiresIn * 1000).toISOString() });
}

/** Ends the session; `reason` is shown on the login page. */
export function signOut(reason?: string): void {
  endedBecause = reason;
  publish(null);
}

/**
 * The owner logs out: the service ends the access token first (a copy of it stops working too), then the
 * session ends here whatever the service answered (a token it already refuses has nothing left to end).
 */
export async function logOut(): Promise<void> {
  try {
    await svc().auth.logout();
  } catch {
    // Ended or unreachable: the tab forgets the token all the same.
  }
  signOut();
}

/** The message left by the last `signOut`, if any. */
export function sessionEndReason(): string | undefined {
  return endedBecause;
}

let client: { token: string; svc: SvcWallet } | undefined;

/** The SDK client of the signed-in owner (the same instance while the session lasts). */
export function svc(): SvcWallet {
  if (!current) throw new Error("not signed in");
  if (client?.token !== current.accessToken) {
    client = {
      token: current.accessToken,
      svc: new SvcWallet({ apiKey: current.accessToken, baseUrl: API_BASE_URL }),
    };
  }
  return client.svc;
}

/** The session, re-rendering on sign-in and sign-out. */
export function useSession(): Session | null {
  return useSyncExternalStore(
    (listener) => {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    () => current,
  );
}
