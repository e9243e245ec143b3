-- Placeholder for migration 005, which belongs to issue 13 (token
-- revocation). tern needs consecutive numbers and this branch (issue 15,
-- hot window) adds 006. DELETE THIS FILE when merging with issue 13's
-- sql/005_*.sql. It does nothing either way.
SELECT 1;

---- create above / drop below ----

SELECT 1;
