/**
 * Today's spending against the daily limit: the service's own figures (`wallet.spending()`), the rolling
 * 24 h as bars by hour, with the running total as a line and the limit as a rule. The figures are also
 * written out, for readers who do not see the chart.
 */
import type { WalletSpending } from "@svc/sdk";
import { formatRelative, formatTime, formatUsd } from "../../format.ts";

const WIDTH = 720;
const HEIGHT = 180;
const PAD = { top: 12, right: 8, bottom: 22, left: 8 };

/** USD decimal string → micro-dollars (exact), then a number for drawing only. */
function micros(usd: string): number {
  const [whole = "0", fraction = ""] = usd.split(".");
  return Number(BigInt(whole) * 1_000_000n + BigInt(fraction.padEnd(6, "0").slice(0, 6) || "0"));
}

/**
 * A bar's hour is the window's, rolling: from 24 h before the figures were read, an hour each, so it starts at
 * the minute it starts (4:59 PM), not on the hour (labelling it "4 PM" put a spend of 5:30 PM under "4 PM").
 */
const timeLabel = new Intl.DateTimeFormat(undefined, { hour: "numeric", minute: "2-digit" });
const HOUR_MS = 3_600_000;

/** "3:59 PM – 4:59 PM" for the hour starting at `start`. */
function hourRange(start: string | undefined): string {
  const from = new Date(start ?? 0);
  return `${timeLabel.format(from)} – ${timeLabel.format(new Date(from.getTime() + HOUR_MS))}`;
}

export function SpendingChart(props: { spending: WalletSpending }) {
  const { spending } = props;
  const perHour = spending.hours.map((hour) => micros(hour.usd));
  const running: number[] = [];
  perHour.reduce((sum, value, i) => {
    running[i] = sum + value;
    return sum + value;
  }, 0);
  const limit = spending.dailyLimit === null ? null : micros(spending.dailyLimit);
  const top = Math.max(limit ?? 0, running.at(-1) ?? 0, 1);
  const plotW = WIDTH - PAD.left - PAD.right;
  const plotH = HEIGHT - PAD.top - PAD.bottom;
  const slot = plotW / 24;
  const y = (value: number) => PAD.top + plotH - (value / top) * plotH;
  const line = running.map((value, i) => `${PAD.left + slot * (i + 1)},${y(value)}`).join(" ");

  const summary =
    spending.dailyLimit === null
      ? `${formatUsd(spending.used)} spent in the last 24 h; no daily limit.`
      : `${formatUsd(spending.used)} of ${formatUsd(spending.dailyLimit)} used in the last 24 h; ${formatUsd(spending.remaining)} left.`;

  return (
    <figure className="spending">
      <figcaption>
        <strong>{summary}</strong>
        {micros(spending.used) > 0 && (
          <span className="muted">
            {" "}
            The oldest spend leaves the window {formatRelative(spending.resetsAt)} (
            {formatTime(spending.resetsAt)}).
          </span>
        )}
      </figcaption>
      {limit !== null && (
        <meter
          className="meter"
          aria-label="Daily limit used"
          min={0}
          max={limit || 1}
          value={Math.min(micros(spending.used), limit || 1)}
          low={limit * 0.5}
          high={limit * 0.8}
          optimum={0}
        />
      )}
      <svg
        viewBox={`0 0 ${WIDTH} ${HEIGHT}`}
        role="img"
        aria-labelledby="spending-title"
        className="spending-chart"
      >
        <title id="spending-title">Spending by hour over the last 24 hours. {summary}</title>
        {perHour.map((value, i) => (
          <rect
            key={spending.hours[i]?.start}
            className="bar"
            x={PAD.left + slot * i + slot * 0.15}
            width={slot * 0.7}
            y={y(value)}
            height={Math.max(0, PAD.top + plotH - y(value))}
          >
            <title>
              {hourRange(spending.hours[i]?.start)}: {formatUsd(spending.hours[i]?.usd)}
            </title>
          </rect>
        ))}
        <polyline className="running" points={`${PAD.left},${y(0)} ${line}`} fill="none" />
        {limit !== null && (
          <>
            <line className="limit" x1={PAD.left} x2={WIDTH - PAD.right} y1={y(limit)} y2={y(limit)} />
            <text className="limit-label" x={WIDTH - PAD.right - 4} y={y(limit) - 4} textAnchor="end">
              limit {formatUsd(spending.dailyLimit)}
            </text>
          </>
        )}
        {[0, 6, 12, 18].map((i) => (
          <text key={i} className="axis" x={PAD.left + slot * i} y={HEIGHT - 6}>
            {timeLabel.format(new Date(spending.hours[i]?.start ?? 0))}
          </text>
        ))}
        <text className="axis" x={WIDTH - PAD.right} y={HEIGHT - 6} textAnchor="end">
          now
        </text>
      </svg>
    </figure>
  );
}
