-- namespace_places (0024) with index scans whatever the catalog's size, as location_holders (0027).
--
-- It runs on every create (inside claim_lookup) under force_generic_plan, so a connection keeps the
-- first plan it makes. While a warehouse has a hundred namespaces or so, that plan is a scan of
-- every namespace row for each path range of a claim - 0.05-0.1 ms a scan at 100 namespaces, and
-- growing with them - where the unique index on (warehouse_id, path) answers with one probe
-- (issue 47: the claim's lookup fell from 0.75 to 0.2 ms, this and one range per outermost root).
ALTER FUNCTION namespace_places(bigint, text[], text[], text[], text) SET enable_seqscan = off;
