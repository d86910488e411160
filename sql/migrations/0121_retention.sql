-- Tag retention (issue 13), Harbor's /retentions: one policy per project (the project's metadata retention_id),
-- its rules and trigger kept in Harbor's JSON shape; executions and one task per repository with its log. Runs are
-- claimed with FOR UPDATE SKIP LOCKED and a lease, so several berthd on one database each run a given execution
-- once, and an execution whose berthd died is taken over when its lease runs out.
CREATE TABLE retention_policies (
    id bigserial PRIMARY KEY,
    project_id bigint NOT NULL UNIQUE REFERENCES projects (id) ON DELETE CASCADE,
    policy jsonb NOT NULL,          -- {algorithm, rules, trigger, scope} as Harbor shows it (id added on read)
    cron text,                      -- trigger.settings.cron when the schedule is on
    last_fired timestamptz,         -- the minute the schedule last started a run (so it starts once per minute)
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE retention_executions (
    id bigserial PRIMARY KEY,
    policy_id bigint NOT NULL REFERENCES retention_policies (id) ON DELETE CASCADE,
    status text NOT NULL DEFAULT 'Pending' CHECK (status IN ('Pending', 'Running', 'Success', 'Error', 'Stopped')),
    trigger text NOT NULL CHECK (trigger IN ('MANUAL', 'SCHEDULE')),
    dry_run boolean NOT NULL DEFAULT false,
    stop_requested boolean NOT NULL DEFAULT false,
    claimed_by text NOT NULL DEFAULT '',
    lease_until timestamptz,
    start_time timestamptz NOT NULL DEFAULT now(),
    end_time timestamptz
);
CREATE INDEX retention_executions_policy ON retention_executions (policy_id, id DESC);
CREATE INDEX retention_executions_queue ON retention_executions (id) WHERE status IN ('Pending', 'Running');

CREATE TABLE retention_tasks (
    id bigserial PRIMARY KEY,
    execution_id bigint NOT NULL REFERENCES retention_executions (id) ON DELETE CASCADE,
    repository text NOT NULL,
    status text NOT NULL DEFAULT 'Running',
    total int NOT NULL DEFAULT 0,    -- artifacts considered
    retained int NOT NULL DEFAULT 0, -- kept (by a rule, or because an immutable tag protects them)
    deleted jsonb NOT NULL DEFAULT '[]', -- what went (or, in a dry run, would go): [{digest, tags}]
    start_time timestamptz NOT NULL DEFAULT now(),
    end_time timestamptz,
    log text NOT NULL DEFAULT ''
);
CREATE INDEX retention_tasks_execution ON retention_tasks (execution_id, id);
