-- Repeated pulls of one manifest by one caller from one address within a few seconds are one audit row with a
-- count (a node pulling in a loop, or a benchmark, would otherwise write a row per request).
ALTER TABLE audit_log ADD COLUMN count int NOT NULL DEFAULT 1 CHECK (count >= 1);
