-- Tag selectors of a policy set (internal/policy, docs/design/policies.md).
-- An inclusion (is_exclude false) applies a non-global set to every
-- workspace whose tag bindings match; an exclusion exempts a matching
-- workspace from the set. tag_value '' is a key-only selector, which
-- matches the key with any value (a binding's '' is a key-only binding).
-- Matching happens when a run's sets are chosen, from the bindings then.
CREATE TABLE policy_set_tag_selectors (
    policy_set_id TEXT NOT NULL REFERENCES policy_sets (id) ON DELETE CASCADE,
    is_exclude BOOLEAN NOT NULL,
    tag_key TEXT NOT NULL,
    tag_value TEXT NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL,
    PRIMARY KEY (policy_set_id, is_exclude, tag_key, tag_value)
);
