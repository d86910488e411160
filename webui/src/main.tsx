// Entry point: the shell (header, navigation, sign-in dialog) and the routes.
import { render } from "preact";
import { Suspense, lazy } from "preact/compat";
import "uplot/dist/uPlot.min.css"; // small; CSS of lazily loaded chunks is not injected by esbuild
import "./style.css";
import { loginNeeded } from "./api";
import { loc, installRouter, match, navigate } from "./router";
import { loadMe, me, ready, signOut } from "./session";
import { Dialog } from "./ui/dialog";
import { ErrorBox, Loading } from "./ui/states";
import { LoginForm, LoginPage } from "./pages/login";
import { ProjectsPage } from "./pages/projects";
import { ProjectPage } from "./pages/project";

const Admin = lazy(() => import("./pages/admin").then((m) => ({ default: m.AdminPage })));
const Repository = lazy(() => import("./pages/repository").then((m) => ({ default: m.RepositoryPage })));
const Artifact = lazy(() => import("./pages/artifact").then((m) => ({ default: m.ArtifactPage })));
const Stats = lazy(() => import("./pages/stats").then((m) => ({ default: m.StatsPage })));

function Header() {
  const path = loc.value.path;
  const u = me.value;
  const cur = (p: string) => (path === p || path.startsWith(p + "/") ? "page" : undefined);
  return (
    <header class="top">
      <a class="skip" href="#main">
        Skip to content
      </a>
      <a class="brand" href="/projects">
        <img src="/favicon.svg" alt="" width="22" height="22" /> Berth
      </a>
      <nav aria-label="Main">
        <a href="/projects" aria-current={cur("/projects")}>
          Projects
        </a>
        {u && (
          <a href="/statistics" aria-current={cur("/statistics")}>
            Statistics
          </a>
        )}
        {u?.sysadmin_flag && (
          <a href="/admin/users" aria-current={cur("/admin")}>
            Administration
          </a>
        )}
      </nav>
      <div class="who">
        {u ? (
          <>
            <span class="user" title={u.sysadmin_flag ? "system administrator" : undefined}>
              {u.username}
              {u.sysadmin_flag ? " (admin)" : ""}
            </span>
            <button
              type="button"
              class="btn"
              onClick={async () => {
                await signOut();
                navigate("/login", true);
              }}
            >
              Sign out
            </button>
          </>
        ) : (
          ready.value && path !== "/login" && (
            <a class="btn primary" href={`/login?next=${encodeURIComponent(path + loc.value.search)}`}>
              Sign in
            </a>
          )
        )}
      </div>
    </header>
  );
}

function Routes() {
  const { path, search } = loc.value;
  let m: Record<string, string> | null;
  if (path === "/" || path === "") {
    navigate("/projects", true);
    return null;
  }
  if (path === "/login") return <LoginPage search={search} />;
  let page;
  if (path === "/projects") page = <ProjectsPage />;
  else if ((m = match("/projects/:name/repositories/:repo/artifacts/:ref", path))) page = <Artifact project={m.name} repo={m.repo} reference={m.ref} />;
  else if ((m = match("/projects/:name/repositories/:repo", path))) page = <Repository project={m.name} repo={m.repo} />;
  else if ((m = match("/projects/:name/:tab", path)) || (m = match("/projects/:name", path))) page = <ProjectPage name={m.name} tab={m.tab ?? "repositories"} />;
  else if ((m = match("/admin/*rest", path))) page = <Admin rest={m.rest} />;
  else if (path === "/statistics") page = <Stats />;
  else page = <ErrorBox error={new Error(`No page at ${path}`)} />;
  return (
    <main id="main" tabIndex={-1}>
      <Suspense fallback={<Loading />}>{page}</Suspense>
    </main>
  );
}

function App() {
  if (!ready.value) return <Loading what="Starting" />;
  return (
    <>
      <Header />
      <Routes />
      <Dialog title="Your session has ended — sign in again" open={loginNeeded.value} onClose={() => navigate("/login?next=" + encodeURIComponent(location.pathname + location.search))}>
        <p class="muted">Sign in to carry on where you were; nothing on this page is lost.</p>
        <LoginForm idPrefix="relogin" onDone={() => {}} />
      </Dialog>
    </>
  );
}

installRouter();
loadMe().catch(() => (ready.value = true));
render(<App />, document.getElementById("app")!);
