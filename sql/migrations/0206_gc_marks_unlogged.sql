-- Issue 13 (GC at scale): a run's marks are a work list, not data. Written unlogged they cost no WAL: the three
-- mark statements insert 420,000 rows at the benchmark's size (1M blobs), and their WAL was what a concurrent manifest
-- PUT's commit waited behind (its p99 was highest during the marks; docs/benchmarks.md). A PostgreSQL crash (or a
-- fail-over) empties the table: a run resumed after that finds no marks after its cursor, ends that sweep phase
-- having deleted less, and the next mark phase (or the next run) marks again. Deleting less is always safe; berthd
-- being killed does not touch the marks (the resume test).
ALTER TABLE gc_marks SET UNLOGGED;
