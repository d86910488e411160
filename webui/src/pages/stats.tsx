export function StatsPage() {
  return <h1>Statistics</h1>;
}
