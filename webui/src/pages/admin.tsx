export function AdminPage({ rest }: { rest: string }) {
  return <h1>Administration: {rest}</h1>;
}
