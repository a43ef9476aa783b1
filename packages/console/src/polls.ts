/**
 * How often the pages that follow the service read it again, so what happens elsewhere appears without a
 * reload. The browser tests move the page's clock by these instead of waiting them out.
 */

/** The event feed. */
export const EVENTS_POLL_MS = 2500;
/** The approval queue. */
export const APPROVALS_POLL_MS = 3000;
/** The count of spends waiting for approval, beside "Approvals" in the navigation. */
export const PENDING_BADGE_POLL_MS = 5000;
