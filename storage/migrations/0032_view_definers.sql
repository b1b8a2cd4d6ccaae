-- A view's definer (issue 51, docs/read-restrictions.md "Views"): the principal whose rights a
-- trusted engine reads the view's tables with when it loads them through the view (loadTable's
-- ``referenced-by``). The principal that last set the view's definition: cleared before every
-- replace and written after it lands (app/views/service.py), so a crash or a race in between leaves
-- a view without a definer - whose tables are then read with the caller's own rights only - never
-- a new definition read with an earlier definer's rights. Gone with the view (a drop, the bin).
--
-- ``source``/``roles``: a principal of Growler's own (its roles are its memberships, read when
-- deciding) or an identity provider's, whose roles claim at definition time is kept.
CREATE TABLE view_definer (
    entry_id    bigint PRIMARY KEY REFERENCES catalog_entry (id) ON DELETE CASCADE,
    principal   text COLLATE "C" NOT NULL,
    source      text NOT NULL,
    roles       text[] NOT NULL DEFAULT '{}',
    set_at      timestamptz NOT NULL DEFAULT now()
);
