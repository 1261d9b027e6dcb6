-- Queue positions (internal/run QueuePositions) count, for each pending
-- run, the runs ahead of it in its workspace: the non-speculative runs
-- that still count in the queue (neither final nor a saved plan). This
-- index holds only those, so the count reads the few runs of the queue,
-- never the workspace's history. The status list is run.notAhead, made
-- from the state machine; the query writes the predicate out the same
-- way (TestQueueIndexIsTheQueue in internal/run checks both).
CREATE INDEX runs_queue ON runs (workspace_id, created_at) WHERE NOT plan_only AND status NOT IN ('applied','canceled','discarded','errored','force_canceled','planned_and_finished','policy_soft_failed','planned_and_saved');
