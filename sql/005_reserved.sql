-- Placeholder on branch wt-retention only: migration 005 belongs to another
-- helper of issue 13/15 (tern needs contiguous numbers and a statement).
-- The lead deletes this file when merging, keeping the real 005.
SELECT 1;

---- create above / drop below ----

SELECT 1;
