// Storage quotas as the pages show and edit them (unit-tested in test/quota.test.ts): Harbor's hard/used in bytes,
// -1 for unlimited.
import { formatBytes } from "./format";

export interface Quota {
  id: number;
  ref: { id: number; name: string; owner_name: string };
  hard: { storage: number };
  used: { storage: number };
  creation_time: string;
  update_time: string;
}

export const LIMIT_UNITS = ["MiB", "GiB", "TiB"] as const;
export type LimitUnit = (typeof LIMIT_UNITS)[number];
const UNIT_BYTES: Record<LimitUnit, number> = { MiB: 1024 ** 2, GiB: 1024 ** 3, TiB: 1024 ** 4 };
export const MAX_LIMIT = 1024 ** 5; // 1024 TiB, the server's ceiling (Harbor's)

/** Share of the limit used, 0..100+ (over a lowered limit it exceeds 100); null when unlimited. */
export function quotaPercent(used: number, hard: number): number | null {
  if (hard < 0) return null;
  if (hard === 0) return used > 0 ? 100 : 0;
  return (used / hard) * 100;
}

/** ok below the warning line, warn from it (85 %, the server's default), bad at or over the limit. */
export function quotaLevel(used: number, hard: number, warnPercent = 85): "ok" | "warn" | "bad" {
  const p = quotaPercent(used, hard);
  if (p == null) return "ok";
  return p >= 100 ? "bad" : p >= warnPercent ? "warn" : "ok";
}

/** "12.0 MiB of 100 MiB (12%)" or "12.0 MiB (no limit)". */
export function quotaText(used: number, hard: number): string {
  const p = quotaPercent(used, hard);
  if (p == null) return `${formatBytes(used)} (no limit)`;
  return `${formatBytes(used)} of ${formatBytes(hard)} (${p < 1 && used > 0 ? "<1" : Math.floor(p)}%)`;
}

/** A limit typed as a number and a unit: bytes, or an error to show. */
export function parseLimit(value: string, unit: LimitUnit): { bytes: number } | { error: string } {
  const v = value.trim();
  if (!/^\d+(\.\d+)?$/.test(v)) return { error: "Enter a positive number." };
  const bytes = Math.round(Number(v) * UNIT_BYTES[unit]);
  if (bytes < 1) return { error: "The limit must be more than 0." };
  if (bytes > MAX_LIMIT) return { error: "The limit can be at most 1024 TiB." };
  return { bytes };
}

/** A limit in bytes as the editor shows it: the largest unit that keeps a whole or short decimal number. */
export function splitLimit(bytes: number): { value: string; unit: LimitUnit } {
  if (bytes < 0) return { value: "", unit: "GiB" };
  for (const unit of ["TiB", "GiB"] as const)
    if (bytes >= UNIT_BYTES[unit] && Number.isInteger((bytes / UNIT_BYTES[unit]) * 100)) return { value: String(bytes / UNIT_BYTES[unit]), unit };
  return { value: String(Math.round((bytes / UNIT_BYTES.MiB) * 100) / 100), unit: "MiB" };
}
