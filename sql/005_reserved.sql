-- Reserved for revocation (issue 13), written on another branch. tern refuses a
-- gap in the numbering, so this branch, which adds 008, holds the number
-- with an empty migration. Delete this file when the real 005_*.sql
-- is merged: two files numbered 005 stop every service at start
-- ("Duplicate migration 005"), so a forgotten placeholder cannot pass.
SELECT 1;

---- create above / drop below ----

SELECT 1;
