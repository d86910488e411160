export function ArtifactPage({ project, repo, reference }: { project: string; repo: string; reference: string }) {
  return <h1>{project}/{repo}@{reference}</h1>;
}
