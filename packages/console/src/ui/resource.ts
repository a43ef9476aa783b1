/**
 * Data loading for pages: a resource is loaded on mount (and every `intervalMs` if given), with its loading,
 * error and data states; actions run one at a time with their own error. A refused credential (the hour's
 * token expired) ends the session instead of showing an error.
 */
import { SvcUnauthorizedError } from "@svc/sdk";
import { type DependencyList, useCallback, useEffect, useRef, useState } from "react";
import { signOut } from "../session.ts";

export interface Resource<T> {
  data: T | undefined;
  error: unknown;
  loading: boolean;
  reload(): void;
}

function endSessionIfRefused(error: unknown): boolean {
  if (error instanceof SvcUnauthorizedError) {
    signOut("Your session has ended. Log in again.");
    return true;
  }
  return false;
}

/** What an action changes that resources elsewhere on the page show (the navigation's count of approvals). */
export type Topic = "approvals";

const followers = new Map<Topic, Set<() => void>>();

/** Tells every resource that follows `topic` to load afresh at once: an action of the page changed it. */
export function changed(topic: Topic): void {
  for (const reload of followers.get(topic) ?? []) reload();
}

/**
 * Loads `load` on mount, again when `deps` change, every `intervalMs` if given, and at once when an action
 * says it changed the resource's `follows` topic ({@link changed}).
 */
export function useResource<T>(
  load: () => Promise<T>,
  deps: DependencyList,
  options: { intervalMs?: number; follows?: Topic } = {},
): Resource<T> {
  const [state, setState] = useState<{ data: T | undefined; error: unknown; loading: boolean }>({
    data: undefined,
    error: undefined,
    loading: true,
  });
  const [generation, setGeneration] = useState(0);
  const loadRef = useRef(load);
  loadRef.current = load;

  // biome-ignore lint/correctness/useExhaustiveDependencies: the caller's deps decide when to load afresh
  useEffect(() => {
    let live = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const run = async () => {
      try {
        const data = await loadRef.current();
        if (live) setState({ data, error: undefined, loading: false });
      } catch (error) {
        if (!live || endSessionIfRefused(error)) return;
        setState((previous) => ({ data: previous.data, error, loading: false }));
      }
      if (live && options.intervalMs) timer = setTimeout(run, options.intervalMs);
    };
    setState((previous) => ({ ...previous, loading: true }));
    void run();
    return () => {
      live = false;
      if (timer) clearTimeout(timer);
    };
  }, [...deps, generation, options.intervalMs]);

  const reload = useCallback(() => setGeneration((g) => g + 1), []);
  useEffect(() => {
    if (!options.follows) return;
    const topic = options.follows;
    const reloads = followers.get(topic) ?? new Set();
    followers.set(topic, reloads);
    reloads.add(reload);
    return () => {
      reloads.delete(reload);
    };
  }, [options.follows, reload]);
  return { ...state, reload };
}

export interface Action<A extends unknown[], R> {
  run(...args: A): Promise<R | undefined>;
  pending: boolean;
  error: unknown;
  clearError(): void;
}

/**
 * An action a button or form starts: its pending state and its error, kept for the view to show. A 401 ends
 * the session, except where the action is the login itself (`endSessionOn401: false`).
 */
export function useAction<A extends unknown[], R>(
  act: (...args: A) => Promise<R>,
  options: { endSessionOn401?: boolean } = {},
): Action<A, R> {
  const endSessionOn401 = options.endSessionOn401 ?? true;
  const [pending, setPending] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const actRef = useRef(act);
  actRef.current = act;
  const run = useCallback(
    async (...args: A) => {
      setPending(true);
      setError(undefined);
      try {
        return await actRef.current(...args);
      } catch (caught) {
        if (!(endSessionOn401 && endSessionIfRefused(caught))) setError(caught);
        return undefined;
      } finally {
        setPending(false);
      }
    },
    [endSessionOn401],
  );
  const clearError = useCallback(() => setError(undefined), []);
  return { run, pending, error, clearError };
}
