export function RepositoryPage({ project, repo }: { project: string; repo: string }) {
  return <h1>{project}/{repo}</h1>;
}
