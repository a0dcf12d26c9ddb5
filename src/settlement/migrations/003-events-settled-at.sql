-- When each event reached PostgreSQL, by PostgreSQL's clock, beside `at` (Redis's clock,
-- the stream entry's time): settled_at - at is the settlement lag of that entry (the bench
-- reports its percentiles). clock_timestamp(), not now(): now() is the transaction's start,
-- the same for a whole batch; clock_timestamp() is the row's insert, inside the settling
-- transaction, a statement or two before its COMMIT.
-- The column comes without a default and gets it after: adding it with a volatile default
-- would rewrite every existing row under an exclusive lock; this way old rows stay NULL
-- (their time is not known) and the ALTERs only change the catalog. The settler's INSERT
-- omits the column, so each new row takes the default; a redelivered entry (ON CONFLICT
-- DO NOTHING) keeps its first time.
ALTER TABLE order_events ADD COLUMN settled_at timestamptz;
ALTER TABLE order_events ALTER COLUMN settled_at SET DEFAULT clock_timestamp();
