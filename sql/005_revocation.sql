-- Revocations (inboxctl user revoke): the tokens of a user's device, or
-- with device '' of every device of the user, issued up to revoked_at are
-- refused, at hello and in a refresh; the gateways close the connections
-- holding them. A later revocation of the same device moves revoked_at on.
-- The rows are small and few (an operator's action), kept for good: a
-- token's lifetime is the issuer's choice, so no row can be known moot.
CREATE TABLE revocation (
    uid        bigint      NOT NULL,
    device     text        NOT NULL, -- '': every device of the user
    revoked_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (uid, device)
);

-- The gateways' sweep reads the revocations of the last minutes (a
-- revocation whose announcement a gateway missed).
CREATE INDEX revocation_by_time ON revocation (revoked_at);

---- create above / drop below ----

DROP TABLE revocation;
