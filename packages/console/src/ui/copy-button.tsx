import { useState } from "react";

/** Copies `value` to the clipboard and says so for two seconds. */
export function CopyButton(props: { value: string; label?: string }) {
  const [copied, setCopied] = useState<"yes" | "failed" | undefined>(undefined);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(props.value);
      setCopied("yes");
    } catch {
      setCopied("failed");
    }
    setTimeout(() => setCopied(undefined), 2000);
  };
  const label = props.label ?? "Copy";
  return (
    <button type="button" className="copy" onClick={copy} aria-label={`${label}: ${props.value}`}>
      {copied === "yes" ? "Copied" : copied === "failed" ? "Copy failed" : label}
    </button>
  );
}
