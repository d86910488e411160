-- Issue #10: Harbor's registry endpoints carry a free-text description; Berth dropped it on the floor.
ALTER TABLE registries ADD COLUMN description text NOT NULL DEFAULT '';
