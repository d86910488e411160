// Proxy-cache projects: the form value of metadata.proxy_speed_kb (Harbor's upstream bandwidth cap).

/** The proxy_speed_kb metadata for a form's text: "" is no limit ("-1"); otherwise a positive whole number of KiB/s. */
export function parseSpeed(text: string): { value: string } | { error: string } {
  const t = text.trim();
  if (t === "") return { value: "-1" };
  if (!/^[0-9]+$/.test(t) || Number(t) < 1 || Number(t) > 2 ** 31) return { error: "The bandwidth limit must be a whole number of KiB/s (empty: no limit)." };
  return { value: String(Number(t)) };
}
