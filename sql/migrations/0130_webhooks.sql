-- Issue 14 (webhooks): per-project notification policies (Harbor's /webhook/policies), an outbox of events and
-- their deliveries. An event row is written by the transaction that makes the change (manifest push/delete,
-- tag delete, the audit writer's batch for pulls, ...) through berth_webhook_enqueue, so a committed change is
-- never without its event and a rolled-back one never has one. Worker threads fan events out into executions
-- (one per policy, Harbor's shape) and tasks (one per target), then claim tasks with FOR UPDATE SKIP LOCKED and
-- a lease, so several berthd on one database deliver each attempt once.
CREATE TABLE IF NOT EXISTS webhook_policies (
    id bigserial PRIMARY KEY,
    project_id bigint NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    name text NOT NULL,
    description text NOT NULL DEFAULT '',
    enabled boolean NOT NULL DEFAULT true,
    event_types text[] NOT NULL,
    -- [{type, address, skip_cert_verify, payload_format, auth_sealed}]: auth headers are sealed like endpoint secrets
    targets jsonb NOT NULL,
    secret bytea NOT NULL, -- the signing secret, sealed (replication/seal.c)
    ca_file text NOT NULL DEFAULT '',
    creator text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (project_id, name)
);

CREATE TABLE IF NOT EXISTS webhook_events (
    id bigserial PRIMARY KEY,
    event_id uuid NOT NULL UNIQUE DEFAULT gen_random_uuid(), -- what receivers de-duplicate on
    project_id bigint NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    type text NOT NULL,
    actor text NOT NULL DEFAULT '', -- Harbor's "operator": who made the change
    repo text,
    digest text,
    tag text,
    extra jsonb, -- merged into the payload's event_data (quota details, retention results, scan verdicts)
    occur_at timestamptz NOT NULL DEFAULT now(),
    dispatched boolean NOT NULL DEFAULT false
);
CREATE INDEX IF NOT EXISTS webhook_events_pending ON webhook_events (id) WHERE NOT dispatched;

CREATE TABLE IF NOT EXISTS webhook_executions (
    id bigserial PRIMARY KEY,
    policy_id bigint NOT NULL REFERENCES webhook_policies(id) ON DELETE CASCADE,
    event_id bigint NOT NULL REFERENCES webhook_events(id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS webhook_executions_policy ON webhook_executions (policy_id, id);

CREATE TABLE IF NOT EXISTS webhook_tasks (
    id bigserial PRIMARY KEY,
    execution_id bigint NOT NULL REFERENCES webhook_executions(id) ON DELETE CASCADE,
    target int NOT NULL, -- index into the policy's targets
    status text NOT NULL DEFAULT 'Pending', -- Pending, Running, Success, Error (Harbor's task states)
    attempts int NOT NULL DEFAULT 0,
    next_at timestamptz NOT NULL DEFAULT now(),
    lease_until timestamptz,
    claimed_by text,
    status_code int,
    log text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now(),
    start_time timestamptz,
    update_time timestamptz NOT NULL DEFAULT now(),
    end_time timestamptz
);
CREATE INDEX IF NOT EXISTS webhook_tasks_due ON webhook_tasks (next_at) WHERE status IN ('Pending', 'Running');
CREATE INDEX IF NOT EXISTS webhook_tasks_execution ON webhook_tasks (execution_id);

-- Whether any enabled policy of the project listens to `etype`: changes in projects without one write nothing.
CREATE OR REPLACE FUNCTION berth_webhook_wanted(pid bigint, etype text) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM webhook_policies w WHERE w.project_id = pid AND w.enabled AND etype = ANY (w.event_types))
$$;

-- The one way to queue an event, called inside the transaction of the change it announces:
--   berth_webhook_enqueue(project, event_type, operator, repo, digest, tag, extra)
-- `project` names the project (NULL: the project of repository `repo`); repo, digest, tag and extra may be NULL.
-- Returns the number of events queued (0 when no enabled policy of the project wants the type, or no project).
CREATE OR REPLACE FUNCTION berth_webhook_enqueue(text, text, text, text, text, text, jsonb) RETURNS integer
LANGUAGE sql VOLATILE AS $$
    WITH p AS (
        SELECT coalesce((SELECT id FROM projects WHERE name = $1),
                        (SELECT project_id FROM repositories WHERE name = $4)) AS id
    ), ins AS (
        INSERT INTO webhook_events (project_id, type, actor, repo, digest, tag, extra)
        SELECT p.id, $2, coalesce($3, ''), $4, $5, $6, $7 FROM p
        WHERE p.id IS NOT NULL AND berth_webhook_wanted(p.id, $2) RETURNING 1
    )
    SELECT count(*)::int FROM ins
$$;
