-- Immutable tag rules (issue 13), Harbor's /projects/{p}/immutabletagrules: a tag whose repository and name match
-- an enabled rule of its project can be created but never moved to another digest or deleted. The selectors keep
-- Harbor's JSON shape; the doublestar matching happens in C (core/selector.c) inside the transaction that changes
-- the tag (sql/immutable.c).
CREATE TABLE immutable_rules (
    id bigserial PRIMARY KEY,
    project_id bigint NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    -- at most 15 rules per project (Harbor's limit): each takes one of 15 slots, so two concurrent creations
    -- cannot both take the last one
    slot int NOT NULL CHECK (slot BETWEEN 1 AND 15),
    priority int NOT NULL DEFAULT 0,
    disabled boolean NOT NULL DEFAULT false,
    action text NOT NULL DEFAULT 'immutable',
    template text NOT NULL DEFAULT 'immutable_template',
    scope_selectors jsonb NOT NULL,
    tag_selectors jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (project_id, slot)
);
