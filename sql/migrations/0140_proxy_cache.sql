-- Issue #14: proxy-cache projects. A project with a registry_id answers pulls it lacks from that endpoint and
-- keeps what it fetched (Harbor's model). The endpoint cannot be deleted while a project proxies it (RESTRICT,
-- as replication policies hold theirs). proxy_speed_kb caps the upstream download rate in KiB/s (-1: none).
ALTER TABLE projects ADD COLUMN registry_id bigint REFERENCES registries (id) ON DELETE RESTRICT;
ALTER TABLE projects ADD COLUMN proxy_speed_kb bigint NOT NULL DEFAULT -1 CHECK (proxy_speed_kb = -1 OR proxy_speed_kb > 0);

-- When a proxied tag was last compared with the upstream: a tag lookup asks the upstream again only after
-- proxy.manifest_ttl seconds. Gone with the repository.
CREATE TABLE proxy_tag_checks (
    repository_id bigint NOT NULL REFERENCES repositories (id) ON DELETE CASCADE,
    tag text COLLATE "C" NOT NULL,
    checked_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (repository_id, tag)
);
